"""CUDA_DEVICE_MAX_CONNECTIONS as a fresh rank process and the bare loop's run set it."""




def test_ranks_and_the_bare_loop_give_cuda_32_work_queues_unless_the_user_chose():
    import os
    import subprocess
    import sys

    from conftest import ROOT

    def seen(code: str, given=None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
        env.update(PYTHONPATH=str(ROOT), **({"CUDA_DEVICE_MAX_CONNECTIONS": given} if given else {}))
        done = subprocess.run([sys.executable, "-c", f"import os; {code}; print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))"],
                              env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split()[-1]

    assert seen("import rn50.rank") == "32"  # a rank process, before its CUDA context
    assert seen("import rn50.rank", given="4") == "4"
    bare = ("from rn50 import baseline; baseline.main(['--arch', 'resnet18', '--image-size', '32', "
            "'--batch-size', '2', '--warmup-steps', '1', '--steps', '1', '--precision', 'fp32'])")
    assert seen("import rn50.baseline") == "None"  # set by the bare loop's run, not by importing it
    assert seen(bare) == "32"
