"""The depthwise-separable CNN in PyTorch: every block by its name, images NCHW."""

import torch.nn.functional as F
from torch import nn

SAME_STRIDE_2 = (0, 1, 0, 1)  # SAME at stride 2 on an even side pads nothing before and one after (not padding=1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding="same")
        self.dw1 = nn.Conv2d(16, 16, 3, stride=2, groups=16)
        self.pw1 = nn.Conv2d(16, 32, 1)
        self.dw2 = nn.Conv2d(32, 32, 3, stride=2, groups=32)
        self.pw2 = nn.Conv2d(32, 64, 1)
        self.dense = nn.Linear(64, 10)

    def forward(self, x):
        out = {"conv": F.relu(self.conv(x / 255.0))}
        out["dw1"] = self.dw1(F.pad(out["conv"], SAME_STRIDE_2))
        out["pw1"] = F.relu(self.pw1(out["dw1"]))
        out["dw2"] = self.dw2(F.pad(out["pw1"], SAME_STRIDE_2))
        out["pw2"] = F.relu(self.pw2(out["dw2"]))
        out["pool"] = out["pw2"].mean((2, 3))
        out["logits"] = self.dense(out["pool"])
        return out
