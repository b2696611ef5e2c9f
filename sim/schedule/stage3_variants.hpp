// ZeRO++ (hpZ, qwZ, qgZ) and MiCS on top of stage 3, private to sim/schedule: the groups they
// build, the sizes they send, and the state hpZ keeps (which parameters hold a secondary copy).
// stage3.cpp's coordinator calls these where DeepSpeed v0.14.2's code branches on the variant;
// docs/zero-variants.md states every rule with its source line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "build.hpp"
#include "stage3_host.hpp"

namespace zerosim::detail {

// The settings and groups of the variants for this run, checked as DeepSpeed checks them (its
// refusals become errors). Fills b.out.meta.variants and meta.groups.
std::optional<Error> setup_zero_variants(Build& b);

// qwZ's scale-group count for N elements (partition_parameters.py CUDAQuantizer.quantize:
// target group size 8000, grown until 8·g divides N); nullopt where DeepSpeed's assertion fails.
std::optional<int64_t> qwz_group_count(int64_t n);

class Stage3Variants {
public:
    explicit Stage3Variants(Build& b);

    // Elements of p's primary partition (ceil(numel / shard count)) and of its hpZ secondary
    // partition (the primary, padded to the DP world, cut in hpZ-group-size pieces).
    int64_t part(int p) const;
    int64_t secondary_part(int p) const;
    // The group of the partition's collectives: the MiCS shard group, else the world.
    GroupKind shard_group() const { return v_.mics > 0 ? GroupKind::MicsShard : GroupKind::Dp; }

    // all_gather_coalesced for the fetch/prefetch of `todo` (ds_id order): with-secondary first on
    // the hpZ group, then the rest; each as int8 data + fp32 scales under qwZ; unlogged under MiCS.
    void fetch(const std::vector<int>& todo, RuleId rule, const std::string& module_name, Stage3Host& host);
    // hpZ: a partition rebuilt from a whole parameter (release, engine start) refreshes its secondary
    // copy; a successful optimizer step drops them all (_post_step invalidate_secondary_tensor).
    void partitioned(int p);
    void invalidate_secondary();

    // qgZ active: the bucket's per-gradient all_to_all / reduce_scatter ops (bucket = flush index).
    bool quantized_gradients() const { return v_.qgz; }
    void quantized_reduce(const std::vector<int>& bucket, int flush, Stream st);
    // MiCS: after a flush's reduce-scatter, on the accumulation boundary, the replication all_reduce.
    void after_flush(const std::vector<int>& bucket, int flush, Stream st);

private:
    Build& b_;
    ZeroVariants v_;
    int64_t world_;
    std::vector<bool> secondary_;
    void gather_group(const std::vector<int>& ps, bool sec, RuleId rule, const std::string& module_name,
                      Stage3Host& host);
};

}  // namespace zerosim::detail
