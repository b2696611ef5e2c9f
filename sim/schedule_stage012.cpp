#include "sim/schedule.hpp"
namespace zerosim::detail {
void generate_stage012(Build& b) { engine_start_broadcasts(b); }
}
