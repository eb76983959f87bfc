"""The instrumented training benchmark that runs, unchanged, inside every image: a workload
(LeNet on CIFAR-10 by default, a built-in ResNet or GPT, or the user's own model) trained with
every step's phases timed, then measured (memory, accuracy, FLOPs, a profile, a probe).

Nothing here may import torch at module level except the training modules: the host imports
``bench.result`` (the result schema) without torch.
"""
