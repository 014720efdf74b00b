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

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(WHEELS) -e '.[test,torch,ray,docs,mjcf]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p out
	$(PY) demos/cartpole_opt.py

# the gradient tests of the phased systems and of Rigid2D's contacts once more on two threads, the parallel kernels
# users get by default: their loops add into shared entries from many items (tests/test_threads.py compares one and two threads directly,
# for every mechanism; the small systems' tests would run serialized again, at their batch sizes; the tests of
# optimization outcomes, marked perturbed, ran three times already); and Rigid2D's implicit contact gradients, whose
# first backward pass once went wrong on several threads only
GRADIENT_TESTS := $(addprefix tests/test_mass_spring.py::test_,every_schedule_gives_the_same_gradients \
	gradients_through_ground_contact) \
	$(addprefix tests/test_mass_spring_3d.py::test_,gradients_in_3d_with_smooth_contact \
	the_hand_written_reverses_are_taichis_reverse_mode) \
	$(addprefix tests/test_rigid2d.py::test_,gradcheck_through_disc_collision gradcheck_every_contact_kind) \
	tests/test_complementarity.py::test_implicit_gradients_are_the_converged_solutions_and_need_no_converged_sweeps \
	tests/test_complementarity.py::test_stack_gradients_match_central_differences_and_every_schedule

# two worker processes (pytest-xdist), a file to each at a time: module fixtures and the Ray cluster stay in one
# process; every worker still runs Taichi on one thread, bitwise reproducible
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not stress"
	TISIM_TEST_THREADS=2 $(PY) -m pytest -q -m "not perturbed and not stress" $(GRADIENT_TESTS)

# the long runs of the hostile-input fuzzing (hypothesis) and of the bound-launch soak (1,500 simulator pairs made,
# used and dropped in random order), which make test runs at a small size, and the tests marked stress: second
# referees whose kernels take minutes to compile (MPM's hand-written reverses against Taichi's reverse mode in 3D)
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

clean:
	rm -rf $(VENV) out .cache *.egg-info
