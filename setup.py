"""Packaging for actorq. The repository root *is* the `actorq` package.

`package_dir={"actorq": "."}` maps the root onto the package name; setuptools >= 70
is required for editable installs of such a mapping (older ones mis-map it).
Tests and this file are not part of the distribution.
"""
import setuptools

_SUBPACKAGES = setuptools.find_packages(
    where=".", exclude=["tests", "tests.*", "examples", "examples.*", "build*", "dist*"]
)

setuptools.setup(
    name="actorq",
    version="0.1.0",
    description="Acme-style actor-learner RL with 8-bit quantized actors (ActorQ).",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10,<3.11",
    packages=["actorq"] + ["actorq." + p for p in _SUBPACKAGES],
    package_dir={"actorq": "."},
    install_requires=[
        "dm-acme==0.4.0",
        "dm-reverb==0.7.0",
        "dm-launchpad==0.5.0",
        "tensorflow-cpu==2.8.4",
        "jax==0.4.23",
        "jaxlib==0.4.23",
        "dm-haiku",
        "optax<0.1.8",
        "chex<0.1.82",
        "rlax",
        "numpy<1.24",
        "scipy<1.12",
        "dm-env",
        "dm-tree",
        "dm-control",
        "gymnasium",
        "gym==0.23.1",  # only so that acme.wrappers / acme.testing.fakes import
        "ai-edge-litert",
        "matplotlib",
        "tqdm",
        "dacite",
        "psutil",
    ],
    extras_require={
        # Acme 0.4.0's own TF actors, the peer column of `actorq bench`.
        "peer": ["dm-sonnet==2.0.0", "trfl==1.2.0", "tensorflow-probability==0.16.0"],
        # `actorq train --track wandb|mlflow` (components/tracking.py); versions that take the
        # stack's protobuf 3.19 and numpy < 1.24 (requirements/constraints-py310.txt).
        "track": ["wandb==0.25.0", "mlflow-skinny==3.18.0"],
    },
    entry_points={"console_scripts": ["actorq=actorq.cli.main:main"]},
)
