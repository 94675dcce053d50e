"""Shared math below the algorithms: GAE, masked means that hold under a strategy, mini-batch
plans, and the choice of the compiled or numpy fast path."""
