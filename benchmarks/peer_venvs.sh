#!/usr/bin/env bash
# The virtual environments of the peers that cannot share tisim's: MJX needs MuJoCo 3 (tisim's tests pin MuJoCo 4),
# Newton brings its own Warp. benchmarks/peers_articulation.py runs their workers in them.
#     bash benchmarks/peer_venvs.sh [mjx] [newton]      # both when none is named
set -euo pipefail
cd "$(dirname "$0")/.."
peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(mjx newton)
for peer in "${peers[@]}"; do
  case "$peer" in
    mjx) packages=(mujoco==3.17.0 mujoco-mjx==3.17.0 jax==0.10.2 jaxlib==0.10.2 numpy==2.4.6) ;;
    newton) packages=(newton==1.8.0 warp-lang==1.19.0 numpy==2.4.6) ;;
    *) echo "unknown peer '$peer': choose mjx or newton" >&2; exit 2 ;;
  esac
  [ -x ".venv-$peer/bin/python" ] || python3.11 -m venv ".venv-$peer"
  ".venv-$peer/bin/pip" install -q "${packages[@]}"
  echo ".venv-$peer: ${packages[*]}"
done
