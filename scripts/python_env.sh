# Sourced by the scripts that need Python packages: one virtual environment, .venv, with what
# the Python package builds with (scikit-build-core, nanobind), what it traces with (JAX),
# and what its tests run with (pytest; flax and optax for the real-program corpus,
# python/tests/real_programs/; mpi4py for the tests across processes, python/tests/mpi/).
# JAX comes from PyPI; it is a dependency of the Python package and of the test and benchmark
# scripts, never of the C++ library.
# JAX, flax and optax are pinned: the corpus, the real programs and the JAX-suite numbers are
# JAX 0.10.2's (../shared/JAX_TODAY.md); a newer JAX prints other jaxprs.
python_packages=(numpy jax==0.10.2 jaxlib==0.10.2 nanobind scikit-build-core pytest flax==0.12.8
                 optax==0.2.8 mpi4py==4.1.2)

ensure_venv() {
  # .venv/refjit-packages records what was installed, so a complete .venv costs nothing.
  if [ ! -x .venv/bin/python ] || [ "$(cat .venv/refjit-packages 2>/dev/null)" != "${python_packages[*]}" ]; then
    echo "python_env.sh: setting up .venv (${python_packages[*]})" >&2
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q "${python_packages[@]}"
    echo "${python_packages[*]}" > .venv/refjit-packages
  fi
}

# Builds and installs the package `refjit` from this checkout into .venv (`pip install .`,
# reusing build/python-wheel/ between runs).
install_refjit_package() {
  ensure_venv
  .venv/bin/pip install -q --no-build-isolation . >&2
}
