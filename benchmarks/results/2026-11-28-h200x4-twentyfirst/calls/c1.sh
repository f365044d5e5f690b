# call 1: install rn50's wheels, stash DALI's first part, copy the tree to /tmp/repo, start the orchestration in its own session
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
mkdir -p /tmp/dchunks /tmp/repo /tmp/res && { [ ! -d .carry/d1 ] || { cp .carry/d1/* /tmp/dchunks/ && touch /tmp/dchunks/done-1; }; }
tar cf - --exclude=./.carry/wh --exclude=./.carry/d1 . | tar xf - -C /tmp/repo
cd /tmp/repo && setsid nohup bash .carry/plan21/${ORCH:-orch6.sh} > /tmp/orch.nohup 2>&1 < /dev/null &
sleep 8; cat /tmp/res/orch.log; nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader; nproc
python3 -c 'import torch;print(torch.__version__)'; echo "c1: $((SECONDS-t0)) s"
