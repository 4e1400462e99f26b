"""The Hopper prefill's causal block order (include/llmk/attention/block_order.cuh) in a list-scheduling model.

The GPU starts blocks in grid order as SMs free up. This model takes that literally: `slots` SMs, one block an SM
(prefill_sm90_kernel's 384 threads and up to 227 KiB), each block starting on the first free SM; a block's time
is the key tiles its causal rows see plus a fixed half tile. It compares the natural order (row tiles fastest,
then KV heads, then sequences) with PrefillBlockOrder's (sections of (sequence, KV head) pairs whose K/V fit in
kPrefillSectionBytes; within a section, row tiles descending, pairs fastest) on the prefill benchmark's causal
shapes and prints each grid's length over the ideal (total work / slots). A prediction, not a measurement:
`BM_Prefill` (causal rows) against SDPA is the measurement.

    python3 -m bench.model.block_order
"""
import heapq
import math

SECTION_BYTES = 16 << 20  # kPrefillSectionBytes
ROWS_PER_BLOCK = 128      # packed (token, head) rows of a block (whole GQA groups)


def makespan(works, slots=132):
    free = [0.0] * slots
    heapq.heapify(free)
    for w in works:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def llmk_order(row_tiles, batch, kv_heads, kv_bytes_per_pair):
    """The row tile of each block in launch order (PrefillBlockOrder::block for a causal launch)."""
    pairs = batch * kv_heads
    per = max(1, min(pairs, SECTION_BYTES // kv_bytes_per_pair))
    out = []
    for linear in range(row_tiles * pairs):
        section_blocks = row_tiles * per
        section = linear // section_blocks
        offset = linear - section * section_blocks
        here = min(per, pairs - section * per)
        out.append(row_tiles - 1 - offset // here)
    return out


def causal_grid(batch, seq, heads, kv_heads, head_dim, fixed=0.5):
    """(natural, llmk) grid lengths over the ideal for a causal prefill of `batch` x `seq` tokens, fp16."""
    group = heads // kv_heads
    row_tiles = math.ceil(seq * group / ROWS_PER_BLOCK)
    bc = 128 if head_dim <= 128 else 64  # DefaultSm90PrefillConfig's key tile

    def work(t):  # key tiles up to the tile's last query (bottom-right causal, q_len == kv_len), + fixed
        last_query = min(seq - 1, ((t + 1) * ROWS_PER_BLOCK - 1) // group)
        return math.ceil((last_query + 1) / bc) + fixed

    natural = [work(t) for _ in range(batch) for _ in range(kv_heads) for t in range(row_tiles)]
    ordered = [work(t) for t in llmk_order(row_tiles, batch, kv_heads, seq * head_dim * 2 * 2)]
    ideal = sum(natural) / 132
    return makespan(natural) / ideal, makespan(ordered) / ideal


def main():
    print("causal prefill grid length / ideal on 132 SMs (list-scheduling model)")
    for heads, kv_heads, d in [(32, 32, 64), (16, 16, 128), (8, 8, 256), (32, 8, 128)]:
        for batch, seq in [(32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384)]:
            nat, new = causal_grid(batch, seq, heads, kv_heads, d)
            print(f"  h{heads} kvh{kv_heads} d{d} b{batch} s{seq}: natural {nat:.3f}  heaviest first {new:.3f}"
                  f"  predicted speedup {nat / new:.3f}x")


if __name__ == "__main__":
    main()
