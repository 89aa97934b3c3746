# Source me: `. tools/venv.sh` makes ./.venv (once) with the best Python on this machine and activates it.
#
# Best: Python 3.12, where the tested set has the newest JAX and Flax (JAX 0.11 and later need 3.12+);
# else Python 3.11, where constraints.txt pins JAX 0.10.2 (the last release for it). A python3.12 that pyenv
# has installed but not selected counts too. PARITY_PYTHON=/path/to/python overrides the choice.
# An existing .venv is kept, whatever its Python (delete it to choose again).
_parity_python() {
    local c v root
    if [ -n "${PARITY_PYTHON:-}" ]; then echo "$PARITY_PYTHON"; return; fi
    for c in python3.12 python3.11; do
        if "$c" -c "import venv" >/dev/null 2>&1; then command -v "$c"; return; fi
        if command -v pyenv >/dev/null 2>&1; then
            root=$(pyenv root)
            v=$(pyenv versions --bare 2>/dev/null | grep -E "^${c#python}(\.[0-9]+)?$" | sort -V | tail -1)
            if [ -n "$v" ] && "$root/versions/$v/bin/$c" -c "import venv" >/dev/null 2>&1; then
                echo "$root/versions/$v/bin/$c"; return
            fi
        fi
    done
    command -v python3
}
if [ ! -x .venv/bin/python ]; then
    _parity_py=$(_parity_python)
    echo "tools/venv.sh: creating .venv with $_parity_py ($("$_parity_py" -c 'import sys; print(sys.version.split()[0])'))" >&2
    "$_parity_py" -m venv .venv || return 1 2>/dev/null || exit 1
    .venv/bin/python -m pip install -q --upgrade pip || return 1 2>/dev/null || exit 1
    unset _parity_py
fi
. .venv/bin/activate
unset -f _parity_python
