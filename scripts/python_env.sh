# Sourced by the scripts that need Python packages: one virtual environment, .venv, with what
# the Python package builds with (scikit-build-core, nanobind), what it traces with (JAX),
# and what its tests run with (pytest). JAX comes from PyPI; it is a dependency of the Python
# package and of the test and benchmark scripts, never of the C++ library.
python_packages=(numpy jax jaxlib nanobind scikit-build-core pytest)

ensure_venv() {
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import jax, nanobind, pytest" 2>/dev/null; then
    echo "python_env.sh: creating .venv (${python_packages[*]})" >&2
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q "${python_packages[@]}"
  fi
}

# Builds and installs the package `refjit` from this checkout into .venv (`pip install .`,
# reusing build/python-wheel/ between runs).
install_refjit_package() {
  ensure_venv
  .venv/bin/pip install -q --no-build-isolation . >&2
}
