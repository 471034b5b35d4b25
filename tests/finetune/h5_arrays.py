"""The HDF5 side of tests/finetune/torchvision_parity.py, run by Debian's python3 with h5py (the PyTorch venv
has none); arrays travel as .npy files.
  h5_arrays.py dataset IMAGES.npy MEAN,.. STD,.. OUT.h5   uint8 NHWC images -> a cnntrain dataset (labels 0)
  h5_arrays.py logits PREDICTIONS.h5 OUT.npy               `cnntrain-data predict`'s /logits"""
import sys

import h5py
import numpy as np

if sys.argv[1] == "dataset":
    images, mean, std, out = sys.argv[2:]
    x = np.load(images)
    with h5py.File(out, "w") as f:
        f.create_dataset("images", data=x)
        f.create_dataset("labels", data=np.zeros(len(x), dtype=np.int32))
        f.attrs["num_classes"] = 1000
        f.attrs["mean"] = np.array([float(v) for v in mean.split(",")], dtype=np.float32)
        f.attrs["std"] = np.array([float(v) for v in std.split(",")], dtype=np.float32)
elif sys.argv[1] == "logits":
    with h5py.File(sys.argv[2], "r") as f:
        np.save(sys.argv[3], f["logits"][:])
else:
    sys.exit(f"h5_arrays.py: unknown command {sys.argv[1]}")
