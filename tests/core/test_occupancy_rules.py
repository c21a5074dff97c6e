"""The occupancy calculator against hand-computed cases for compute capability
9.0 (H100) and 8.9 (RTX 4090). No device needed: the devices are described by
their properties, as the CUDA runtime reports them.

Each case was worked out on paper from CUDA's rules; the arithmetic is in the
comment beside it so that a failure can be checked by hand.
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench.backends.contract import DeviceProperties, KernelResources
from workbench.backends.registers import max_threads_per_block
from workbench.errors import LaunchConfigError
from workbench.hardware.occupancy import occupancy
from workbench.hardware.occupancy_rules import KernelUsage, SMModel, registers_limit

KIB = 1024

H100 = DeviceProperties(
    index=0, name="H100 (cc 9.0)", compute_capability=(9, 0), multiprocessors=132,
    total_memory=80 << 30, shared_memory_per_block=48 * KIB,
    shared_memory_per_block_optin=227 * KIB, shared_memory_per_multiprocessor=228 * KIB,
    registers_per_block=65536, registers_per_multiprocessor=65536,
    max_threads_per_multiprocessor=2048, max_blocks_per_multiprocessor=32,
    extra={"reservedSharedMemPerBlock": 1024})

RTX4090 = DeviceProperties(
    index=0, name="RTX 4090 (cc 8.9)", compute_capability=(8, 9), multiprocessors=128,
    total_memory=24 << 30, shared_memory_per_block=48 * KIB,
    shared_memory_per_block_optin=99 * KIB, shared_memory_per_multiprocessor=100 * KIB,
    registers_per_block=65536, registers_per_multiprocessor=65536,
    max_threads_per_multiprocessor=1536, max_blocks_per_multiprocessor=24,
    extra={"reservedSharedMemPerBlock": 1024})


def usage(registers=32, static=0, max_threads=None, max_dynamic=None, carveout=None):
    return KernelUsage(registers=registers, static_shared=static,
                       max_threads_per_block=max_threads, max_dynamic_shared=max_dynamic,
                       carveout=carveout)


# (device, kernel usage, block, dynamic shared, expected blocks/SM, expected binding limit)
CASES = [
    # --- cc 9.0: 64 warps, 32 blocks, 64 K registers, 228 KiB shared per SM ---
    # 8 warps/block: warps 64/8 = 8; registers 32*32 = 1024/warp -> 16 warps per
    # sub-partition -> 64/8 = 8; shared 1 KiB reserve -> 228; blocks 32
    pytest.param(H100, usage(32), 256, 0, 8, ("warps", "registers"), id="9.0-32regs-256"),
    # 64 regs: 2048/warp -> 8 warps per sub-partition -> 32 warps -> 32/4 = 8 blocks (50 %)
    pytest.param(H100, usage(64), 128, 0, 8, ("registers",), id="9.0-64regs-128"),
    # 37 regs: 1184/warp rounds up to 1280 -> 16384//1280 = 12 warps per sub-partition
    # -> 48 warps -> 48/6 = 8 blocks (warps would allow 64/6 = 10)
    pytest.param(H100, usage(37), 192, 0, 8, ("registers",), id="9.0-37regs-granularity"),
    # one-warp blocks: warps allow 64, the SM holds only 32 blocks
    pytest.param(H100, usage(16), 32, 0, 32, ("blocks",), id="9.0-block-limit"),
    # 32 KiB dynamic + 1 KiB reserve = 33792 B -> 233472 // 33792 = 6 (7 without the reserve)
    pytest.param(H100, usage(32), 256, 32 * KIB, 6, ("shared memory",), id="9.0-shared-reserve"),
    # static 6000 + dynamic 1000 + reserve 1024 = 8024 -> rounded to 128 B: 8064
    # -> 233472 // 8064 = 28 (blocks allow 32)
    pytest.param(H100, usage(32, static=6000), 32, 1000, 28, ("shared memory",),
                 id="9.0-shared-granularity"),
    # 48 KiB dynamic is the default maximum: 50176 B per block -> 4 blocks
    pytest.param(H100, usage(32), 128, 48 * KIB, 4, ("shared memory",), id="9.0-48KiB"),
    # one byte more than the kernel's default maximum: cannot launch
    pytest.param(H100, usage(32), 128, 48 * KIB + 1, 0, ("dynamic shared memory",),
                 id="9.0-over-default-max"),
    # opted in to 227 KiB: 100 KiB + 1 KiB = 103424 B -> 233472 // 103424 = 2
    pytest.param(H100, usage(32, max_dynamic=227 * KIB), 128, 100 * KIB, 2, ("shared memory",),
                 id="9.0-optin-100KiB"),
    # the whole opt-in size: 227 KiB + 1 KiB = 228 KiB -> exactly one block
    pytest.param(H100, usage(32, max_dynamic=227 * KIB), 128, 227 * KIB, 1, ("shared memory",),
                 id="9.0-optin-all"),
    # carve-out 50 %: 116736 B rounds up to the 132 KiB split; 17 KiB blocks -> 135168 // 17408 = 7
    pytest.param(H100, usage(32, carveout=50), 128, 16 * KIB, 7, ("shared memory",),
                 id="9.0-carveout-50"),
    # the same without a carve-out preference: 233472 // 17408 = 13 (warps allow 16)
    pytest.param(H100, usage(32), 128, 16 * KIB, 13, ("shared memory",), id="9.0-no-carveout"),
    # carve-out 0 %: the SM takes the smallest split holding one block (32 KiB) -> 1
    pytest.param(H100, usage(32, carveout=0), 128, 16 * KIB, 1, ("shared memory",),
                 id="9.0-carveout-0"),
    # 255 regs: 8160 -> 8192 per warp, 8 warps = 64 K registers: one block
    pytest.param(H100, usage(255), 256, 0, 1, ("registers",), id="9.0-255regs-256"),
    # 9 warps of 8192 registers exceed the 64 K per block: cannot launch
    pytest.param(H100, usage(255), 288, 0, 0, ("registers",), id="9.0-255regs-288"),
    # __launch_bounds__(256): a 512-thread block cannot launch
    pytest.param(H100, usage(32, max_threads=256), 512, 0, 0, ("block size",),
                 id="9.0-launch-bounds"),
    # 100 threads take 4 warps: warps 64/4 = 16, registers 64/4 = 16
    pytest.param(H100, usage(32), 100, 0, 16, ("warps", "registers"), id="9.0-partial-warp"),
    # --- cc 8.9: 48 warps, 24 blocks, 64 K registers, 100 KiB shared per SM ---
    # warps 48/8 = 6, registers 64/8 = 8, blocks 24
    pytest.param(RTX4090, usage(32), 256, 0, 6, ("warps",), id="8.9-32regs-256"),
    # one-warp blocks: 24 blocks = 24 of 48 warps
    pytest.param(RTX4090, usage(32), 32, 0, 24, ("blocks",), id="8.9-block-limit"),
    # 64 regs: 32 warps -> 32/8 = 4 blocks (warps allow 6)
    pytest.param(RTX4090, usage(64), 256, 0, 4, ("registers",), id="8.9-64regs-256"),
    # 168 regs: 5376 per warp -> 16384 // 5376 = 3 per sub-partition -> 12 warps -> 3 blocks
    pytest.param(RTX4090, usage(168), 128, 0, 3, ("registers",), id="8.9-168regs-128"),
    # 16 KiB + 1 KiB = 17408 B -> 102400 // 17408 = 5 (warps allow 12)
    pytest.param(RTX4090, usage(32), 128, 16 * KIB, 5, ("shared memory",), id="8.9-16KiB"),
    # opted in to 99 KiB: 99 KiB + 1 KiB = 100 KiB -> one block
    pytest.param(RTX4090, usage(32, max_dynamic=99 * KIB), 128, 99 * KIB, 1, ("shared memory",),
                 id="8.9-optin-all"),
    # a larger attribute does not help: 99 KiB + 1 B + 1 KiB exceeds the 100 KiB per block
    pytest.param(RTX4090, usage(32, max_dynamic=200 * KIB), 128, 99 * KIB + 1, 0,
                 ("shared memory",), id="8.9-over-optin"),
    # carve-out 25 %: 25600 B rounds up to the 32 KiB split; 9 KiB blocks -> 32768 // 9216 = 3
    pytest.param(RTX4090, usage(32, carveout=25), 64, 8 * KIB, 3, ("shared memory",),
                 id="8.9-carveout-25"),
    # static 8 KiB: the default dynamic maximum is 40 KiB
    pytest.param(RTX4090, usage(32, static=8 * KIB), 64, 40 * KIB + 1, 0,
                 ("dynamic shared memory",), id="8.9-static-lowers-max"),
]


@pytest.mark.parametrize("device, kernel, block, dynamic, blocks, binding", CASES)
def test_hand_computed_cases(device, kernel, block, dynamic, blocks, binding):
    occ = occupancy(kernel, block=block, shared_mem=dynamic, device=device)
    assert occ.active_blocks == blocks
    assert occ.binding == binding
    assert occ.active_warps == blocks * -(-block // 32)
    assert occ.occupancy == pytest.approx(occ.active_warps / (device.max_threads_per_multiprocessor // 32))


def test_limits_report_every_rule():
    occ = occupancy(usage(64), block=128, shared_mem=16 * KIB, device=H100)
    # warps 64/4, registers 32 warps/4, shared 233472 // 17408, blocks 32
    assert occ.limits == {"warps": 16, "registers": 8, "shared memory": 13, "blocks": 32}
    assert occ.registers_per_block == 4 * 2048
    assert occ.shared_per_block == 16 * KIB + 1024
    assert occ.limit == "registers"


def test_suggested_block_is_largest_with_best_occupancy():
    # cc 9.0, 32 regs: 2048 threads fit with any block of 64..1024 threads dividing 2048
    assert occupancy(usage(32), block=128, device=H100).suggested_block == 1024
    # cc 8.9, 32 regs: 1536 threads need >= 2 blocks of <= 768 threads; 1024 gives only 1024
    assert occupancy(usage(32), block=128, device=RTX4090).suggested_block == 768
    # block=None picks it
    assert occupancy(usage(32), device=RTX4090).block == 768


def test_shared_memory_growing_with_block_size():
    # 8 B per thread: at 512 threads, 4096 + 1024 B per block -> 233472 // 5120 = 45, warps give 4
    occ = occupancy(usage(32), block=512, shared_mem=lambda b: 8 * b, device=H100)
    assert occ.shared_mem == 4096
    assert occ.limits["shared memory"] == 45
    sweep = occ.sweep().to_pandas().set_index("block")
    assert sweep.loc[1024, "shared_mem"] == 8192
    assert list(sweep.index) == list(range(32, 1025, 32))


def test_sweep_matches_single_calls():
    occ = occupancy(usage(40, static=2048), block=256, shared_mem=3000, device=RTX4090)
    df = occ.sweep().to_pandas()
    for row in df.itertuples():
        single = occupancy(usage(40, static=2048), block=int(row.block), shared_mem=3000, device=RTX4090)
        assert single.active_blocks == row.active_blocks
        assert single.limit == row.limit


def test_unknown_registers_are_not_applied_and_said():
    occ = occupancy(KernelResources(registers=None, shared_bytes=0), block=256, device=H100)
    assert occ.limits["registers"] is None
    assert occ.active_blocks == 8  # warps alone
    assert any("register count unknown" in n for n in occ.notes)


def test_carveout_tables():
    assert SMModel.from_properties(H100).carveouts[-1] == 228 * KIB
    assert [c // KIB for c in SMModel.from_properties(RTX4090).carveouts] == [0, 8, 16, 32, 64, 100]
    assert SMModel.from_properties(H100).align_carveout(100 * KIB + 1) == 132 * KIB


def test_reserve_defaults_to_1KiB_from_ampere():
    props = DeviceProperties(**{**H100.__dict__, "extra": {}})
    assert SMModel.from_properties(props).shared_reserved_per_block == 1024


@pytest.mark.parametrize("bad, message", [
    (dict(block=0), "positive"),
    (dict(block=2048), "exceeds the device.s limit 1024"),
    (dict(block=(32, 32, 2)), "at most 1024"),
    (dict(block=(1, 1, 128)), "exceeds the device's limit"),
    (dict(block=256, shared_mem=-1), "shared_mem"),
    (dict(block=256, carveout=150), "carveout"),
])
def test_bad_arguments_raise_with_a_message(bad, message):
    with pytest.raises(LaunchConfigError, match=message):
        occupancy(usage(32), device=H100, **bad)


def test_numpy_integers_are_accepted_like_ints():
    plain = occupancy(usage(32), block=256, shared_mem=1024, device=H100, carveout=50)
    numpy = occupancy(usage(32), block=np.int64(256), shared_mem=np.int64(1024), device=H100,
                      carveout=np.int32(50))
    assert numpy.to_dict() == plain.to_dict()
    assert type(numpy.block) is int and type(numpy.shared_mem) is int
    dims = occupancy(usage(32), block=(np.int32(16), np.int32(16)), device=H100)
    assert dims.block == 256
    with pytest.raises(LaunchConfigError, match="shared_mem"):
        occupancy(usage(32), block=256, shared_mem=1024.0, device=H100)
    with pytest.raises(LaunchConfigError, match="block"):
        occupancy(usage(32), block=True, device=H100)


def test_not_a_kernel_raises_type_error():
    with pytest.raises(TypeError, match="needs a workbench Kernel"):
        occupancy("saxpy", block=256, device=H100)


def test_results_present_the_figures():
    occ = occupancy(usage(64), block=128, shared_mem=16 * KIB, device=H100)
    text = repr(occ)
    assert "8 blocks/SM, 32 of 64 warps (50%), limited by registers" in text
    assert "suggested block size: 1024" in text
    assert "<table>" in occ._repr_html_()
    row = occ.to_pandas().iloc[0]
    assert row["active_blocks"] == 8 and row["limit_shared_memory"] == 13
    d = occ.to_dict()
    assert d["limits"]["registers"] == 8 and d["binding"] == ["registers"]
    cannot = occupancy(usage(32, max_threads=256), block=512, device=H100)
    assert "cannot launch" in repr(cannot) and "256" in repr(cannot)


def test_plot_marks_limits_and_returns_a_closed_figure(tmp_path):
    import matplotlib  # lazy: the Agg backend must be chosen before pyplot is imported
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg")
    from matplotlib.figure import Figure  # lazy: after matplotlib.use("Agg")
    open_before = plt.get_fignums()
    fig = occupancy(usage(64), block=128, device=H100).plot()
    assert isinstance(fig, Figure)
    assert plt.get_fignums() == open_before  # not left open in pyplot: shows once, as the value
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "limited by registers" in labels
    assert "suggested 1024" in labels
    fig.savefig(tmp_path / "occ.png")
    _, ax = plt.subplots()
    try:
        assert occupancy(usage(64), block=128, device=H100).plot(ax=ax) is ax.figure
    finally:
        plt.close(ax.figure)


@pytest.mark.parametrize("device", [H100, RTX4090], ids=["9.0", "8.9"])
def test_largest_block_by_registers_is_the_one_nvrtc_reports(device):
    # One rule for both: the biggest block whose registers fit is what NVRTC's results call
    # the kernel's max threads per block (64 K registers per block on both devices).
    sm = SMModel.from_properties(device)
    for registers in range(1, sm.max_registers_per_thread + 1):
        fitting = [w for w in range(1, 33) if registers_limit(sm, registers, w)[0] > 0]
        assert max(fitting) * 32 == max_threads_per_block(registers), registers
