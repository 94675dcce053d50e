#!/usr/bin/env bash
# Build kerasrl's sdist, install it (with its [test] extra) into a fresh venv, and run the
# sdist's own tests against the INSTALLED package: what a user or a distro packager gets.
#
#   benchmarks/check_sdist.sh            # the tests that are not marked slow
#   benchmarks/check_sdist.sh --all      # every test
#   benchmarks/check_sdist.sh --keep -x  # keep the temp dir; other arguments go to pytest
#
# Needs a C compiler and the package index (TensorFlow is installed into the venv: a few
# minutes the first time, less with pip's cache). PYTHON picks the interpreter (python3).
# Exits non-zero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
MARK=(-m "not slow")
KEEP=0
PYTEST_ARGS=()
for arg in "$@"; do
    case "$arg" in
        --all) MARK=() ;;
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) PYTEST_ARGS+=("$arg") ;;
    esac
done

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0
unset PYTHONPATH  # nothing but the venv decides what gets imported

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kerasrl-sdist.XXXXXX")"
cleanup() {
    if [ "$KEEP" = 1 ]; then echo "check_sdist: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

START=$SECONDS
step() { echo "check_sdist: [$((SECONDS - START))s] $*"; }

# 1. The sdist: PEP 517 `build` when it can be installed (into its own venv), else setup.py.
step "building the sdist of $ROOT"
mkdir -p "$WORK/dist"
"$PY" -m venv "$WORK/tools"
if "$WORK/tools/bin/python" -m pip install -q build; then
    "$WORK/tools/bin/python" -m build --sdist --outdir "$WORK/dist" "$ROOT" > "$WORK/build.log" 2>&1 \
        || { tail -40 "$WORK/build.log"; echo "check_sdist: FAILED to build the sdist" >&2; exit 1; }
else
    step "'build' is not installable: python3 setup.py sdist"
    (cd "$ROOT" && "$PY" setup.py -q egg_info --egg-base "$WORK" sdist -d "$WORK/dist")
fi
SDISTS=("$WORK"/dist/kerasrl-*.tar.gz)
[ "${#SDISTS[@]}" = 1 ] && [ -f "${SDISTS[0]}" ] || { echo "check_sdist: expected one sdist in $WORK/dist" >&2; exit 1; }
SDIST="${SDISTS[0]}"
step "sdist: $(basename "$SDIST") ($(du -k "$SDIST" | cut -f1) KiB, $(tar tzf "$SDIST" | grep -vc '/$') files)"

# 2. A fresh, plain venv (no system site-packages) with the sdist and its test extra.
step "installing kerasrl[test] from the sdist into a fresh venv"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "kerasrl[test] @ file://$SDIST" \
    || { echo "check_sdist: FAILED to install the sdist" >&2; exit 1; }
step "installed: $("$VPY" -m pip list 2>/dev/null | grep -iE '^(kerasrl|tensorflow[-_a-z]*|keras|numpy) ' | tr -s ' ' | paste -sd ',' -)"

# 3. The sdist's own tests, unpacked elsewhere. Its kerasrl/ sources are removed so that only the
#    installed package can be imported (even by subprocesses that put the folder on sys.path);
#    the sample configs stay, as a docs example (docs/guides/configuration.md) reads kerasrl/configs/*.yaml from the root.
mkdir -p "$WORK/src"
tar xzf "$SDIST" -C "$WORK/src"
SRC="$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'kerasrl-*')"
find "$SRC/kerasrl" -type f ! -path "$SRC/kerasrl/configs/*.yaml" -delete
find "$SRC/kerasrl" -depth -type d -empty -delete
cd "$SRC"
FILE="$("$VPY" -c 'import kerasrl; print(kerasrl.__file__)')"
step "kerasrl.__file__ = $FILE"
case "$FILE" in
    "$WORK/venv/"*) ;;
    *) echo "check_sdist: kerasrl is not imported from the venv's install" >&2; exit 1 ;;
esac
step "kerasrl.configs: $("$VPY" -c 'from kerasrl.configs import available_configs, config_path as p; print(", ".join(p(n) for n in available_configs()))')"

step "running the sdist's tests in $SRC: pytest ${MARK[*]} ${PYTEST_ARGS[*]}"
set +e
"$WORK/venv/bin/pytest" -p no:cacheprovider -q --rootdir "$SRC" "${MARK[@]}" tests "${PYTEST_ARGS[@]}"
RC=$?
set -e
if [ "$RC" = 0 ]; then
    step "OK: the installed sdist passes its tests"
else
    step "FAILED: pytest exited $RC"
fi
exit "$RC"
