# Sourced by the scripts: sets PY to the interpreter to use and cds to the repo root ($ROOT).
# SPECPILOT_PYTHON=/path/to/python skips the venv; otherwise scripts/setup_env.sh prepares
# ${SPECPILOT_VENV:-$ROOT/.venv} (a no-op when it is up to date; its progress goes to stderr).
if [ -n "${SPECPILOT_PYTHON:-}" ]; then
    PY="$SPECPILOT_PYTHON"
else
    VENV="${SPECPILOT_VENV:-$ROOT/.venv}"
    bash "$ROOT/scripts/setup_env.sh" "$VENV" >&2
    PY="$VENV/bin/python"
fi
export SPECPILOT_CALLER_CWD="${SPECPILOT_CALLER_CWD:-$PWD}"  # relative user paths stay the caller's
cd "$ROOT"
