// A long run timed from its template: predict simulates the first steps of a schedule stream
// (schedule/stream.hpp: the engine start, the steps that still differ, the step that repeats and
// the last step) and, where the template's timing has settled, writes every later step as the
// settled step moved by one period, so that 1,000 steps are written in the memory of six.
//
// Why this is the simulation's own answer, not an extrapolation: the engine is deterministic, and
// a repeated step's ops, waits and sizes are the previous step's moved by one step. Once one step
// is timed exactly as the one before it, moved by a period T (every op's start, end and issue,
// algorithm and protocol, and the step's figures), and neither step overlaps the next, each
// later repeated step starts from the same state, moved by T, and is timed the same. Where the
// template shows anything else (a step still settling at the template's fourth step, steps that
// overlap), time_by_period says why and predict simulates every step instead.
// tests/unit/test_timed_stream.cpp checks the streamed outputs against every step simulated.
#pragma once

#include <functional>
#include <string>

#include "core/error.hpp"
#include "schedule/stream.hpp"
#include "timing/engine.hpp"

namespace zerosim {

struct TimedStream {
    const ScheduleStream* stream = nullptr;
    const Prediction* logged = nullptr;       // the template's, every op simulated
    const Prediction* overlapped = nullptr;
    int settled_from = 0;                     // the template step from which each step repeats the one before
    double period_logged_s = 0, period_overlapped_s = 0;
    // The run's step figures and totals (ops, host timeline and samples left as the template's).
    Prediction logged_run, overlapped_run;

    // Every op of the run in issue order, with its timing in both modes.
    void each_op(const std::function<void(const Op&, const OpTiming& logged, const OpTiming& overlapped)>& visit) const;
};

// The template's timing, repeated: an error saying why not where it has not settled by the
// template's fourth step (or the stream does not repeat).
Result<TimedStream> time_by_period(const ScheduleStream& s, const Prediction& logged, const Prediction& overlapped);

}  // namespace zerosim
