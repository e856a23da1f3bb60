"""The optional C extension tcmp.summaries.compiled (tcmp/summaries/compiled.c): tensor mode's one-pass pair loop
and the summaries' moments loops. Everything else is declared in pyproject.toml. Without a C compiler the install still
succeeds (`optional`) and tcmp computes the same numbers with numpy, several times slower."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tcmp.summaries.compiled",
            sources=["tcmp/summaries/compiled.c"],
            optional=True,
            # -fopenmp-simd: the `omp simd` reductions vectorize without -ffast-math (no OpenMP runtime);
            # -ffp-contract=off: no fused multiply-adds, so element-wise results equal numpy's bit for bit;
            # -fno-trapping-math: lets the ε substitution be a select instead of a branch.
            extra_compile_args=["-O3", "-fopenmp-simd", "-ffp-contract=off", "-fno-trapping-math"],
        )
    ]
)
