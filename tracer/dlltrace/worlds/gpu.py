r"""Whether a Linux machine has an NVIDIA GPU and its driver: the facts that say why libcuda.so.1 (the driver's
library) did not load, read where the program ran (`dlltrace run`) and recorded with its other facts (the
elf_system event's `gpu`), so that a report says "this machine has no NVIDIA GPU" instead of "install a driver".

What each fact is read from (no program is run, nothing needs root):
- the GPUs: /sys/bus/pci/devices/*/vendor 0x10de (NVIDIA) with a class 0x03xxxx (a display or 3D controller;
  NVIDIA's audio and USB functions of the same card are 0x04 and 0x0c). sysfs is not namespaced: a container
  sees the host's devices, whether or not it was given them;
- the kernel driver: /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05
  ..."), which the nvidia module makes when it is loaded (the open kernel modules too);
- the device nodes: /dev/nvidiactl, which the driver's installer (or nvidia-modprobe) makes on the host, and which
  a container has only when it was started with the GPU (docker run --gpus, the NVIDIA Container Toolkit);
- WSL 2: /dev/dxg, the Windows driver's paravirtual GPU (its libcuda.so.1 is in /usr/lib/wsl/lib); or WSL's own
  kernel (/proc/sys/kernel/osrelease "5.15.153.1-microsoft-standard-WSL2"), which a container of Docker Desktop
  started without the GPU (no /dev/dxg) runs on: its PCI bus lists Hyper-V's devices, never the host's NVIDIA GPU;
- Jetson (Tegra): its GPU is on the chip, not on a PCI bus, and its driver is nvgpu, not nvidia (no
  /proc/driver/nvidia): the device tree's compatible (/proc/device-tree/compatible "nvidia,tegra234") or the nvgpu
  module (/sys/module/nvgpu, which a container sees too; Docker hides /sys/firmware and so the device tree).

On Windows the traced Python's bootstrap reads the same facts from the registry (trace/shim.py windows_gpu_fields:
the display adapters of HKLM\SYSTEM\CurrentControlSet\Enum\PCI, and the driver their Control\Class key names)
into its py_gpu event: an NVIDIA GPU is a display adapter with vendor VEN_10DE (one Windows runs on its Basic Display
Adapter, no NVIDIA driver installed, included; and a 3D controller with no driver at all, a laptop's NVIDIA GPU
before NVIDIA's driver, told by its CompatibleIDs' PCI class 03), the kernel driver NVIDIA's DriverVersion when NVIDIA provides
that adapter's driver; Windows has no device nodes (always "there"). Enum keeps a card that was taken out: such a
phantom reads as a GPU, never as none.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS = "0x03"  # PCI base class 03: display controllers (VGA 0x0300, 3D 0x0302)
DRIVER_STATES = ("no_gpu", "no_kernel_driver", "no_device_nodes", "no_user_library")  # (rule_driver_state's)
KERNEL_VERSION = re.compile(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b")


@dataclass(frozen=True)
class GpuFacts:
    """A Linux machine's NVIDIA GPUs and driver, as `dlltrace run` read them (module docstring)."""

    pci_devices: int  # PCI functions sysfs lists (0: the bus could not be read, nothing is known)
    nvidia_gpus: tuple[str, ...]  # the PCI addresses of NVIDIA display or 3D controllers
    kernel_driver: Optional[str]  # the loaded nvidia kernel module's version, None: not loaded
    device_nodes: bool  # /dev/nvidiactl is there
    wsl: bool  # /dev/dxg is there, or WSL's kernel: WSL 2, whose GPU is the Windows driver's
    tegra: bool = False  # a Jetson: its GPU is the chip's own (nvgpu), on no PCI bus (absent in older traces)

    def as_dict(self) -> dict:
        return {"pci_devices": self.pci_devices, "nvidia_gpus": list(self.nvidia_gpus),
                "kernel_driver": self.kernel_driver, "device_nodes": self.device_nodes, "wsl": self.wsl,
                "tegra": self.tegra}


def gpu_facts_from_dict(d: object) -> Optional[GpuFacts]:
    """An elf_system event's `gpu` back as GpuFacts (None: not recorded, or not readable as them)."""
    if not isinstance(d, dict):
        return None
    n, gpus, kernel = d.get("pci_devices"), d.get("nvidia_gpus"), d.get("kernel_driver")
    if not isinstance(n, int) or isinstance(n, bool) or not isinstance(gpus, list):
        return None
    return GpuFacts(n, tuple(x for x in gpus if isinstance(x, str)), kernel if isinstance(kernel, str) else None,
                    d.get("device_nodes") is True, d.get("wsl") is True, d.get("tegra") is True)


def _first_line(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline(512).strip()
    except OSError:
        return None


def read_gpu_facts(root: str = "/") -> GpuFacts:
    """This machine's GpuFacts (`root`: where / is, for tests)."""
    bus = os.path.join(root, "sys/bus/pci/devices")
    try:
        devices = sorted(os.listdir(bus))
    except OSError:
        devices = []
    gpus = []
    for dev in devices:
        vendor = _first_line(os.path.join(bus, dev, "vendor"))
        klass = _first_line(os.path.join(bus, dev, "class"))
        if vendor is not None and vendor.lower() == NVIDIA_VENDOR and (klass or "").lower().startswith(DISPLAY_CLASS):
            gpus.append(dev)
    version = _first_line(os.path.join(root, "proc/driver/nvidia/version"))
    m = KERNEL_VERSION.search(version) if version else None
    kernel = m.group(1) if m is not None else ("" if version is not None else None)
    release = _first_line(os.path.join(root, "proc/sys/kernel/osrelease")) or ""
    tegra = "nvidia,tegra" in (_first_line(os.path.join(root, "proc/device-tree/compatible")) or "") or \
        os.path.isdir(os.path.join(root, "sys/module/nvgpu"))
    return GpuFacts(len(devices), tuple(gpus), kernel, os.path.exists(os.path.join(root, "dev/nvidiactl")),
                    os.path.exists(os.path.join(root, "dev/dxg")) or "microsoft" in release.lower(), tegra)


DriverState = str  # "", "no_gpu", "no_kernel_driver", "no_device_nodes", "no_user_library" (rule_driver_state)


def rule_driver_state(gpu: Optional[GpuFacts]) -> DriverState:
    """Why the NVIDIA driver's library (libcuda.so.1, nvcuda.dll) was not there, from the machine's GPU facts, as
    the driver's fix says it (Fix.value; loader/linux/fixes.py, diagnosis/explain.py provider_advice):
      no_gpu            no NVIDIA display or 3D controller on a PCI bus that lists devices: no driver makes CUDA
                        work on this machine;
      no_kernel_driver  an NVIDIA GPU, and no nvidia kernel module loaded: the driver is not installed (or not
                        loaded since it was);
      no_device_nodes   the kernel module is loaded, /dev/nvidiactl is not there: a container started without
                        the GPU (the host has it: sysfs and /proc/driver show the host's);
      no_user_library   the GPU, the module and its device nodes, and no libcuda.so.1: the driver's user-space
                        libraries are not installed (or not of the module's version);
      ""                not known: no facts (an older trace, a virtual world), a PCI bus that could not be read, or
                        WSL 2 (its driver is the Windows host's, its libcuda.so.1 in /usr/lib/wsl/lib; a container
                        there without the GPU sees no NVIDIA device either), or a Jetson (its GPU on no PCI bus)."""
    if gpu is None or gpu.wsl or gpu.tegra or gpu.pci_devices == 0:
        return ""
    if not gpu.nvidia_gpus:
        return "no_gpu"
    if gpu.kernel_driver is None:
        return "no_kernel_driver"
    if not gpu.device_nodes:
        return "no_device_nodes"
    return "no_user_library"
