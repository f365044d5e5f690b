# One H200, a fresh machine: rn50 installed from its wheelhouse (HEAD 5583109) and run from an empty folder as a
# user would, in the image's own environment (PYTHONDONTWRITEBYTECODE=1). "none": Python's bytecode cache
# kept off, as before 5583109 (a named place that does not exist, with writing off: rn50 leaves both as they
# are); "kept": rn50's own cache in ~/.cache/rn50/pycache.
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
echo "install $((SECONDS - t0)) s; PYTHONDONTWRITEBYTECODE=$PYTHONDONTWRITEBYTECODE; $(nvidia-smi -L)"
mkdir -p /tmp/u $OUT/c4 && cd /tmp/u
run() {
  local n=$1; shift; local s=$SECONDS
  env "$@" python3 -m rn50 bench.repeats=1 hydra.run.dir=/tmp/u/$n > $OUT/c4/$n.log 2>&1; local rc=$?
  cp /tmp/u/$n/summary.json $OUT/c4/$n.json
  python3 -c "import json; m = json.load(open('$OUT/c4/$n.json')); print('$n', 'rc $rc', $((SECONDS - s)), 's', round(m['throughput/images_per_sec'], 1), {k[13:-2]: round(v, 1) for k, v in m.items() if k.startswith('time/startup')}, 'loss', round(m['train/loss_first'], 3), round(m['train/loss_last'], 4), 'skipped', m['train/skipped_steps_window'])"
}
run none_1 PYTHONPYCACHEPREFIX=/tmp/none
run kept_1
run kept_2
run none_2 PYTHONPYCACHEPREFIX=/tmp/none
run kept_3
echo "pycache: $(du -sh ~/.cache/rn50/pycache | cut -f1), $(find ~/.cache/rn50/pycache -name '*.pyc' | wc -l) files; /tmp/none: $(ls /tmp/none 2>&1 | head -1)"
python3 -c "import torch, rn50; print('torch', torch.__version__, 'rn50', rn50.__file__)"
