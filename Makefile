# One command each, on a fresh machine with only Python and the package registry: make demo, make test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TI_SKIP_VERSION_CHECK := ON
export TI_OFFLINE_CACHE_FILE_PATH ?= $(CURDIR)/.cache/taichi
export MPLBACKEND := Agg

.PHONY: demo test stress docs bench clean

# torch==2.13.0 (the optional PyTorch interop, tested too): these machines keep its CPU build in /opt/wheels
WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)

# uv installs the same packages as pip in a quarter of the time (10 s against 40 on 2 cores); pip where uv cannot
EXTRAS := '.[test,torch,ray,docs,mjcf]'
$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	($(PY) -m pip install --quiet uv && $(PY) -m uv pip install --quiet --python $(PY) $(WHEELS) -e $(EXTRAS)) || \
	  ($(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet $(WHEELS) -e $(EXTRAS))
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p out
	$(PY) demos/cartpole_opt.py

# two worker processes (pytest-xdist), a file to each at a time, the longest files first (tests/conftest.py):
# module fixtures and the Ray cluster stay in one process; every worker runs Taichi on one thread, bitwise
# reproducible, and tests/test_threads.py compares the parallel kernels users get by default (two threads) with one
# thread on every kind of step
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not stress"

# the long runs of the hostile-input fuzzing (hypothesis) and of the bound-launch soak (1,500 simulator pairs made,
# used and dropped in random order), which make test runs at a small size, and the tests marked stress: second
# referees whose kernels take minutes to compile (MPM's hand-written reverses against Taichi's reverse mode) and
# learning outcomes over seeds too long for make test (SHAC on the swing-up)
stress: $(STAMP)
	TISIM_FUZZ_EXAMPLES=300 TISIM_SOAK_SIMULATORS=1500 $(PY) -m pytest -q -n 2 tests/test_surface.py
	$(PY) -m pytest -q -m stress

# the documentation site, built strict: a broken link, a missing page or an unresolved API reference fails it
# (NO_MKDOCS_2_WARNING: without the theme's notice about its successor)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d out/site

bench: $(STAMP)
	mkdir -p out
	$(PY) -m pip install --quiet $(WHEELS) -e '.[bench]'
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/cartpole_gradient_vs_cem.py
	$(PY) benchmarks/systems.py
	$(PY) benchmarks/mass_spring.py
	$(PY) benchmarks/checkpointing.py
	$(PY) benchmarks/peers.py
	$(PY) benchmarks/taichi_storage.py
	$(PY) benchmarks/taichi_cpu_limits.py
	$(PY) benchmarks/sweep.py
	$(PY) benchmarks/envs.py
	$(PY) benchmarks/policy_baselines.py
	$(PY) benchmarks/policy_baselines_reacher.py
	$(PY) benchmarks/clay_baselines.py
	$(PY) benchmarks/shaping_cost.py
	$(PY) benchmarks/coupled_cost.py
	$(PY) benchmarks/peers_articulation.py

clean:
	rm -rf $(VENV) out .cache *.egg-info
