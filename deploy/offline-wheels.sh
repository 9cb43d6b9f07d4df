#!/usr/bin/env bash
# The wheelhouse an air-gapped node needs: Herd's own wheel, built from the committed HEAD, and
# every runtime dependency at the version requirements.lock pins, for one Python and platform.
# Run it where pip reaches an index; copy the folder to the node; install with no network:
#
#   python3 -m pip install --no-index --find-links wheelhouse 'herd[export,bench]'
#   python3 -m pip install --no-index --no-deps wheelhouse/*.whl     # one built with NO_TORCH=1
#
# Usage (from anywhere in the clone):  deploy/offline-wheels.sh [OUT]     (default OUT: wheelhouse/)
#   PYVER=3.12          target CPython version; default: the running python3's
#   PLATFORM=x86_64     target architecture for manylinux wheels (x86_64, aarch64); implied by PYVER
#   EXTRAS=export,bench Herd's extras to include (bench: matplotlib and RLlib for bench/)
#   NO_TORCH=1          leave torch and its CUDA libraries out (a node whose image ships torch)
# pip's own settings apply as usual (PIP_INDEX_URL for a CUDA-specific torch index, a proxy).
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

out=${1:-wheelhouse}
py=${PYTHON:-python3}
extras=${EXTRAS:-export,bench}

# A target other than this machine: binary wheels only, matched by tag (pip cannot build an sdist
# for another interpreter).
target=()
if [ -n "${PYVER:-}" ] || [ -n "${PLATFORM:-}" ]; then
  arch=${PLATFORM:-x86_64}
  ver=${PYVER:-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
  target=(--only-binary=:all: --implementation cp --python-version "$ver")
  for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    target+=(--platform "${tag}_${arch}")
  done
  target+=(--platform "linux_${arch}")
fi

rm -rf "$out" && mkdir -p "$out"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT

# Herd's wheel of what is committed (uncommitted edits are not shipped by accident).
git archive HEAD | tar -x -C "$src"
"$py" -m pip wheel -q --no-deps "$src" -w "$out"
wheel=$(ls "$out"/herd-*.whl)

# Everything it needs at the locked versions. Torch is constrained out with an impossible pin
# when NO_TORCH=1, so pip fails loudly if another package insists on it.
constraints=(-c requirements.lock)
if [ "${NO_TORCH:-0}" = 1 ]; then
  grep -v '^torch==' requirements.lock > "$src/lock.txt"
  constraints=(-c "$src/lock.txt")
  "$py" -m pip download -q "${target[@]}" "${constraints[@]}" -d "$out" --no-deps "$wheel"
  "$py" - "$wheel" "$extras" > "$src/reqs.txt" <<'PY'
import sys, zipfile
from email.parser import Parser
wheel, extras = sys.argv[1], set(filter(None, sys.argv[2].split(",")))
with zipfile.ZipFile(wheel) as z:
    meta = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode())
for req in meta.get_all("Requires-Dist") or []:
    name, _, marker = req.partition(";")
    wanted = not marker or any(f'extra == "{e}"' in marker for e in extras)
    if wanted and not name.strip().startswith(("torch", "herd")):
        print(name.strip())
PY
  "$py" -m pip download -q "${target[@]}" "${constraints[@]}" -d "$out" -r "$src/reqs.txt"
else
  "$py" -m pip download -q "${target[@]}" "${constraints[@]}" -d "$out" "${wheel}[${extras}]"
fi

count=$(ls "$out" | wc -l)
echo "$out/: $count files, $(du -sh "$out" | cut -f1) (Herd $(basename "$wheel"))"
if [ "${NO_TORCH:-0}" = 1 ]; then  # pip would ask for the locked torch: take the node's as it is
  echo "on the node: python3 -m pip install --no-index --no-deps $out/*.whl"
else
  echo "on the node: python3 -m pip install --no-index --find-links $out 'herd[$extras]'"
fi
