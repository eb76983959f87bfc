"""The instrumented LeNet/CIFAR-10 benchmark that runs, unchanged, inside every image.

Nothing here may import torch at module level except the training modules: the host imports
``bench.result`` (the result schema) without torch.
"""
