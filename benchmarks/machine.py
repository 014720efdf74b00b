"""The machine a benchmark ran on, as benchmarks/results/README.md asks for it: the CPU model, cores, architecture
and vector instruction set (ratios against JAX and MuJoCo differ between an AVX2 and an AVX-512 CPU), read from
/proc/cpuinfo where there is one."""
import os
import platform


def describe(note=None):
    model, flags = "not recorded", set()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name") and model == "not recorded":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    vector = next((name for name in ("avx512f", "avx2", "avx") if name in flags), "not recorded")
    out = {"cpu_model": model, "cores": os.cpu_count(), "architecture": platform.machine(),
           "vector_instruction_set": {"avx512f": "AVX-512"}.get(vector, vector.upper()), "gpu": "none used"}
    return dict(out, note=note) if note else out
