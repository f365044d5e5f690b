cd /tmp/lx && . /work/main/.venv/bin/activate
export PYTHONPATH=/work/main
C=(train=accuracy model=resnet50 precision=fp32 dist.accelerator=cpu data=imagefolder data.root=/tmp/learn
   data.image_size=64 data.num_workers=1 train.epochs=10 train.lr_warmup_epochs=1 train.target_top1=0.95)
for spec in "A3 dist=1n2g data.batch_size=64 seed=2" "C3 dist=1n1g data.batch_size=128 seed=2"; do
  set -- $spec; n=$1; shift
  s=$(date +%s)
  python -m rn50 "${C[@]}" "$@" hydra.run.dir=/tmp/lx/$n > /tmp/lx/$n.log 2>&1
  echo "$n rc=$? $(( $(date +%s) - s )) s" >> /tmp/lx/summary
done
