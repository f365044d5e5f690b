# sourced by each call: where the results and the DALI chunks live on the warm machine
export TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor PYTHONUNBUFFERED=1
mkdir -p /tmp/res /tmp/dchunks
stash() { [ -d "$1" ] && cp "$1"/* /tmp/dchunks/ && echo "stashed $(ls /tmp/dchunks | wc -l) chunks, $(du -sm /tmp/dchunks | cut -f1) MB"; }
pack() { tar czf "$OUT/$1.tgz" -C /tmp/res "$1"; ls -la "$OUT"; }
python3 -c 'import rn50' 2>/dev/null || { echo "rn50 not installed: a fresh machine"; }
nvidia-smi -L
