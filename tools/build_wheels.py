"""Build RelayMQ's distributions: compiled platform wheels, pure wheels and sdists.

    .venv/bin/python tools/build_wheels.py [--out DIR] [--pure-only] [PACKAGE_DIR ...]

For every workspace package: an sdist and a pure-Python wheel (`uv build`, the
fallback for machines without a compiler), and for the packages that list
per-message modules (`[tool.relaymq.compile]`) also a platform wheel for the
running interpreter that carries the mypyc extensions: the pure wheel plus the
extensions, the mypyc runtime library of the group and `_compiled_sources.json`
(so `relaymq.compiled` runs them), tagged `cpXY-cpXY-<platform>` with
`Root-Is-Purelib: false`. pip and uv prefer the platform wheel where it fits and
take the pure one elsewhere. `make wheels` runs this into `dist/`.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compile_hot_paths as chp  # noqa: E402

ROOT = chp.ROOT
ALL_PACKAGES = ["core", *sorted(str(p.parent.relative_to(ROOT)) for p in
                                (ROOT / "plugins").glob("*/pyproject.toml"))]


def _uv() -> list[str]:
    found = shutil.which("uv") or next(
        (str(p) for p in (ROOT / ".tools" / "bin" / "uv",) if p.exists()), None)
    return [found] if found else [sys.executable, "-m", "uv"]


def platform_tag() -> str:
    """`cp311-cp311-linux_x86_64` for the running interpreter (mypyc output is
    specific to the interpreter version and its ABI, never abi3)."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{py}-{plat}"


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def add_extensions(pure_wheel: Path, extras: dict[str, bytes], out_dir: Path) -> Path:
    """A platform wheel: `pure_wheel`'s files plus `extras` (archive name -> bytes)."""
    tag = platform_tag()
    dist, version = pure_wheel.name.split("-")[:2]
    target = out_dir / f"{dist}-{version}-{tag}.whl"
    records: list[list[str]] = []
    with zipfile.ZipFile(pure_wheel) as src, \
            zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        dist_info = next(n.split("/")[0] for n in src.namelist()
                         if n.split("/")[0].endswith(".dist-info"))
        for info in src.infolist():
            name = info.filename
            if name == f"{dist_info}/RECORD":
                continue
            data = src.read(info)
            if name == f"{dist_info}/WHEEL":
                data = _wheel_metadata(data.decode(), tag).encode()
            dst.writestr(name, data)
            records.append(_record_line(name, data))
        for name, data in sorted(extras.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            dst.writestr(info, data, zipfile.ZIP_DEFLATED)
            records.append(_record_line(name, data))
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows(records)
        writer.writerow([f"{dist_info}/RECORD", "", ""])
        dst.writestr(f"{dist_info}/RECORD", buf.getvalue())
    return target


def _wheel_metadata(text: str, tag: str) -> str:
    lines = [ln for ln in text.splitlines()
             if not ln.startswith(("Root-Is-Purelib:", "Tag:")) and ln.strip()]
    return "\n".join([*lines, "Root-Is-Purelib: false", f"Tag: {tag}"]) + "\n"


def compiled_files(package: Path) -> dict[str, bytes]:
    """archive name -> bytes of the in-tree extensions and manifests of `package`."""
    src = package / "src"
    files = [*chp._built_files(src), *src.glob(f"*/{chp.MANIFEST}")]
    return {str(p.relative_to(src)).replace("\\", "/"): p.read_bytes() for p in files}


def build(package: Path, out: Path, pure_only: bool) -> list[Path]:
    before = set(out.glob("*"))
    subprocess.run([*_uv(), "build", "--quiet", "--out-dir", str(out), str(package)], check=True)
    made = sorted(p for p in set(out.glob("*")) - before if p.name != ".gitignore")
    if pure_only or not chp._modules(package):
        return made
    if not chp.build(package):
        print(f"build_wheels: {package.name}: no compiled wheel (pure wheel and sdist only)",
              file=sys.stderr)
        return made
    pure = next(p for p in made if p.name.endswith("-py3-none-any.whl"))
    made.append(add_extensions(pure, compiled_files(package), out))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="*", help="package directories (default: all)")
    parser.add_argument("--out", default=str(ROOT / "dist"), help="output directory")
    parser.add_argument("--pure-only", action="store_true", help="no compiled wheels")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for package in [ROOT / p for p in (args.packages or ALL_PACKAGES)]:
        for path in build(package, out, args.pure_only):
            print(path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
