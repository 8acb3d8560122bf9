# Sourced by scripts that need JAX (the corpus generator, the peer benchmark): JAX from PyPI
# in .venv-jax, a test and benchmark dependency only, never one of the library.
ensure_jax() {
  if [ ! -x .venv-jax/bin/python ]; then
    python3 -m venv .venv-jax
    .venv-jax/bin/pip install -q jax jaxlib numpy
  fi
}
