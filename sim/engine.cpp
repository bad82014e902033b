// The event loop. A change marks the classes it affects dirty; they are re-rated once per event, after
// everything that event caused, and an activity whose rate changed is rescheduled (its pending completion
// replaced: sim/event_queue.hpp).
#include "sim/engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "sim/activities.hpp"
#include "sim/class_run.hpp"
#include "sim/event_queue.hpp"
#include "sim/host_timeline.hpp"
#include "sim/links.hpp"
#include "sim/rank_drift.hpp"

namespace twin::sim {

namespace {

static_assert(kHorizonNs < TimeNs{1} << 57, "the event queue keeps times in 57 bits");

// Float error must not add a nanosecond to an exact result: 1000 ns at 1.5x is 1500, not 1501.
// The ceiling in integers (a truncation, plus one where it fell short): the same as std::ceil for every value here,
// without the float sequence that x86-64's baseline emulates std::ceil with (every rating waits on it).
TimeNs ceil_ns(double ns) {
  if (!(ns <= static_cast<double>(kHorizonNs))) beyond_horizon();  // NaN included
  const double exact = ns - (1e-6 + ns * 1e-12);
  if (!(exact > 0)) return 0;
  const auto truncated = static_cast<TimeNs>(exact);  // below 2^63; above 2^53 every double is an integer
  return truncated + (static_cast<double>(truncated) < exact ? 1 : 0);
}

// Removes one element equal to `value`, which is there (its op put it there when it began).
void erase_one(std::vector<std::uint8_t>& values, std::uint8_t value) {
  *std::find(values.begin(), values.end(), value) = values.back();
  values.pop_back();
}

// A communication op in progress: a collective or context send on one class, or a pipeline transfer
// (side 0 the send, side 1 the recv) whose two ends finish together.
struct CommRun {
  std::array<std::int32_t, 2> rank_class{-1, -1};
  std::array<std::uint32_t, 2> op{};
  const CollectivePlan* plan = nullptr;
  double message_bytes = 0;
  double receive_scale = 1.0;  // pipeline transfer: receiver's bytes per GPU over the sender's
  int phase = 0;
  int flows_left = 0;
  bool latency_done = false;
  bool nccl = false;  // its op's CommKernel is NCCL's (rating its flows reads it, not the op)
  std::uint8_t interference_row = 0;  // its op's row of FlatIteration::interference
  TimeNs arrival_wait_ns = 0;  // for the group's last rank, before the first phase (sim/rank_drift.hpp)
};

class Engine {
 public:
  Engine(const FlatIteration& flat, const IterationGraph& graph, const SimOptions& options)
      : flat_(flat), graph_(graph), record_(options.record_op_timings), loads_(flat.classes.size()),
        classes_(flat.classes.size()), activities_(flat.classes.size()), host_(flat) {
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      const FlatClass& flat_class = flat.classes[c];
      ClassRun& run = classes_[c];
      run.pending = flat_class.predecessors;
      run.state.assign(flat_class.ops.size(), OpState::blocked);
      if (record_) run.timings.resize(flat_class.ops.size());
    }
    queue_.reserve(4096);
    runs_.reserve(64);
  }

  IterationResult run() {
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      for (std::uint32_t i = 0; i < classes_[c].pending.size(); ++i)
        if (classes_[c].pending[i] == 0) start_op(static_cast<int>(c), i);
    }
    issue_ready();
    refresh_dirty();
    std::uint64_t events = 0;
    while (!queue_.empty()) {
      const Event event = queue_.pop();
      ++events;
      now_ = event.time_ns;
      complete(event.activity);
      issue_ready();
      refresh_dirty();
    }
    for (const ClassRun& run : classes_)
      if (run.done != run.state.size()) report_deadlock(flat_, graph_, classes_);
    return iteration_result(classes_, events);
  }

 private:
  // ---- ops ----
  // Op i's dependencies have finished: it starts now, or in a class with host time once the event is processed.
  void start_op(int c, std::uint32_t i) {
    if (const std::vector<TimeNs>& issue = flat_.classes[c].issue_at_ns; !issue.empty() && issue[i] > now_) {
      const std::uint32_t a = activities_.acquire(ActivityKind::issue, now_);  // the host has not issued it yet
      activities_[a].rank_class = c;
      activities_[a].target = i;
      queue_.schedule(a, issue[i]);
      return;
    }
    if (!host_.defer(c, i)) launch(c, i);
  }

  // The ops the event made ready in classes with host time start when their class's host is free for them.
  void issue_ready() {
    for (const Admission& admission : host_.admit(now_)) {
      if (admission.start_ns <= now_) {
        launch(admission.rank_class, admission.op);
        continue;
      }
      const std::uint32_t a = activities_.acquire(ActivityKind::host, now_);
      activities_[a].rank_class = admission.rank_class;
      activities_[a].target = admission.op;
      queue_.schedule(a, admission.start_ns);
    }
  }

  void launch(int c, std::uint32_t i) {
    const FlatOp& op = flat_.classes[c].ops[i];
    switch (op.kind) {
      case OpClass::compute: {
        begin(c, i, /*communication=*/false);
        const std::uint32_t a = activities_.acquire(ActivityKind::compute, now_);
        Activity& act = activities_[a];
        act.rank_class = c;
        act.target = i;
        act.remaining = static_cast<double>(op.nominal_ns);
        list(a, c);
        return;
      }
      case OpClass::collective:
      case OpClass::ring_send:
        begin(c, i, /*communication=*/true);
        start_run({c, -1}, {i, 0}, flat_.classes[c].plans[op.plan], op.message_bytes, 1.0, arrival_wait_ns(c, i));
        return;
      case OpClass::pipeline_send:
      case OpClass::pipeline_recv: {
        classes_[c].state[i] = OpState::waiting_peer;
        if (classes_[op.peer_class].state[op.peer_op] != OpState::waiting_peer) return;
        const bool is_send = op.kind == OpClass::pipeline_send;
        const int sender = is_send ? c : op.peer_class;
        const std::uint32_t send = is_send ? i : op.peer_op;
        const int receiver = is_send ? op.peer_class : c;
        const std::uint32_t recv = is_send ? op.peer_op : i;
        begin(sender, send, true);
        begin(receiver, recv, true);
        const FlatOp& send_op = flat_.classes[sender].ops[send];
        start_run({sender, receiver}, {send, recv}, flat_.classes[sender].plans[send_op.plan], send_op.message_bytes,
                  send_op.receive_scale);
        return;
      }
    }
  }

  // The op becomes active: the breakdown sees it, and overlap may re-rate the class's other work.
  void begin(int c, std::uint32_t i, bool communication) {
    ClassRun& run = classes_[c];
    const bool optimizer = flat_.classes[c].ops[i].optimizer;
    run.clock.advance(now_);
    if (communication) {
      run.clock.begin_communication(optimizer);
      const CommKernel kernel = flat_.classes[c].ops[i].comm_kernel;
      if (kernel == CommKernel::nccl) run.active_rows.push_back(flat_.classes[c].ops[i].interference);
      // A second NCCL op of another kind or size may slow the compute beside it more than the first.
      const int active = ++run.active_by_kernel[static_cast<int>(kernel)];
      if ((active == 1 || (kernel == CommKernel::nccl && flat_.interference.several_rows)) &&
          kernel != CommKernel::userbuffers_copy_engine)
        mark_dirty(c);
    } else {
      run.clock.begin_compute(optimizer);
      run.active_bands.push_back(flat_.classes[c].ops[i].interference);
      // A second concurrent compute op (double strand) halves the first one's rate: re-rate the class.
      const int computing = run.clock.compute_active();
      if (computing >= 2 || (computing == 1 && flat_.interference.any_communication_slowdown)) mark_dirty(c);
    }
    run.state[i] = OpState::running;
    if (record_) run.timings[i].start_ns = now_;
    // The ops this one will release are read when it finishes: fetch them now. A long iteration's flat ops
    // (56 bytes each, millions of them) are long out of cache by then, and waiting for that load was most of
    // start_op's time (perf annotate, the 1T 64-stage pipeline).
    const FlatClass& flat_class = flat_.classes[c];
    const FlatOp& op = flat_class.ops[i];
    const auto prefetch = [&](std::uint32_t next) {
      __builtin_prefetch(&flat_class.ops[next]);
      __builtin_prefetch(&flat_class.ops[next].kind);  // 56-byte ops straddle cache lines
      __builtin_prefetch(&run.pending[next]);
    };
    for (std::uint32_t s = op.successors_begin; s < op.successors_end; ++s) prefetch(flat_class.successors[s]);
    if (op.next_in_stream != kNoNextInStream) prefetch(op.next_in_stream);
  }

  void finish_op(int c, std::uint32_t i) {
    ClassRun& run = classes_[c];
    const FlatClass& flat_class = flat_.classes[c];
    const FlatOp& op = flat_class.ops[i];
    run.clock.advance(now_);
    if (op.kind == OpClass::compute) {
      run.clock.end_compute(op.optimizer);
      erase_one(run.active_bands, op.interference);
      const int computing = run.clock.compute_active();
      if (computing >= 1 || flat_.interference.any_communication_slowdown) mark_dirty(c);
    } else {
      run.clock.end_communication(op.optimizer);
      if (op.comm_kernel == CommKernel::nccl) erase_one(run.active_rows, op.interference);
      const int active = --run.active_by_kernel[static_cast<int>(op.comm_kernel)];
      if ((active == 0 || (op.comm_kernel == CommKernel::nccl && flat_.interference.several_rows)) &&
          op.comm_kernel != CommKernel::userbuffers_copy_engine)
        mark_dirty(c);
    }
    run.state[i] = OpState::done;
    ++run.done;
    run.finish_ns = now_;
    if (record_) run.timings[i].end_ns = now_;
    for (std::uint32_t s = op.successors_begin; s < op.successors_end; ++s) {
      const std::uint32_t next = flat_class.successors[s];
      if (--run.pending[next] == 0) start_op(c, next);
    }
    if (op.next_in_stream != kNoNextInStream && --run.pending[op.next_in_stream] == 0) start_op(c, op.next_in_stream);
  }

  // ---- communication ----
  // Collective i waits for the last of its group's ranks (sim/rank_drift.hpp); begin() advanced the clock to now.
  TimeNs arrival_wait_ns(int c, std::uint32_t i) {
    ClassRun& run = classes_[c];
    return collective_arrival_wait_ns(flat_.classes[c], i, run.clock.breakdown().compute_ns, run.aligned_compute_ns);
  }

  void start_run(std::array<std::int32_t, 2> rank_class, std::array<std::uint32_t, 2> op, const CollectivePlan& plan,
                 double message_bytes, double receive_scale = 1.0, TimeNs arrival_wait_ns = 0) {
    std::uint32_t r;
    if (!free_runs_.empty()) {
      r = free_runs_.back();
      free_runs_.pop_back();
    } else {
      r = static_cast<std::uint32_t>(runs_.size());
      runs_.emplace_back();
    }
    const bool nccl = flat_.classes[rank_class[0]].ops[op[0]].comm_kernel == CommKernel::nccl;
    runs_[r] = CommRun{rank_class, op, &plan, message_bytes, receive_scale, 0, 0, false, nccl,
                       flat_.classes[rank_class[0]].ops[op[0]].interference, arrival_wait_ns};
    continue_run(r, /*may_finish_now=*/false);
  }

  // Runs the plan from the current phase until something has to wait (latency or flows). A run that
  // would end during its own start ends through a zero delay instead, so finishing never recurses.
  void continue_run(std::uint32_t r, bool may_finish_now) {
    CommRun& run = runs_[r];
    if (run.arrival_wait_ns > 0) {
      schedule_delay(r, std::exchange(run.arrival_wait_ns, 0));
      return;
    }
    while (run.phase < run.plan->phase_count) {
      const CollectivePhase& phase = run.plan->phases[run.phase];
      if (!run.latency_done && phase.latency_ns > 0) {
        run.latency_done = true;
        schedule_delay(r, phase.latency_ns);
        return;
      }
      run.latency_done = false;
      if (start_flows(r, phase) > 0) return;
      ++run.phase;
    }
    if (!may_finish_now) {
      schedule_delay(r, 0);
      return;
    }
    const CommRun finished = run;
    free_runs_.push_back(r);
    finish_op(finished.rank_class[0], finished.op[0]);
    if (finished.rank_class[1] >= 0) finish_op(finished.rank_class[1], finished.op[1]);
  }

  int start_flows(std::uint32_t r, const CollectivePhase& phase) {
    int started = 0;
    for (int f = 0; f < phase.flow_count; ++f) {
      const CollectiveFlow& flow = phase.flows[f];
      if (flow.bytes <= 0) continue;
      const CommRun& run = runs_[r];
      const int from = run.rank_class[0];
      const int to = run.rank_class[1] >= 0 ? run.rank_class[1] : from;
      FlowRoute route;
      for (int link = 0; link < kLinkKindCount; ++link) {
        if (!(flow.links & (1 << link))) continue;
        // A pipeline transfer leaves the sender's GPUs and enters the receiver's; a collective's (and a
        // ring-attention send's) GPUs send and receive at once, so it occupies both directions of one class.
        route.add(from, link, Direction::transmit, capacity_GBps(from, link, run.message_bytes));
        route.add(to, link, Direction::receive, capacity_GBps(to, link, run.message_bytes) / run.receive_scale);
      }
      const std::uint32_t a = activities_.acquire(ActivityKind::flow, now_);
      Activity& act = activities_[a];
      act.target = r;
      act.remaining = flow.bytes;
      act.route = route;
      loads_.attach(route);
      for (int i = 0; i < route.count; ++i) mark_dirty(route.resources[i].rank_class);
      list(a, from);
      if (to != from) list(a, to);
      ++started;
    }
    runs_[r].flows_left = started;
    return started;
  }

  double capacity_GBps(int c, int link, double message_bytes) const {
    const LinkParams& links = flat_.classes[c].links;
    return links.bandwidth_GBps[link] * links.efficiency[link].at(message_bytes);
  }

  void schedule_delay(std::uint32_t r, TimeNs latency_ns) {
    const std::uint32_t a = activities_.acquire(ActivityKind::delay, now_);
    activities_[a].target = r;
    queue_.schedule(a, later(now_, latency_ns));
  }

  // ---- activities ----
  void complete(std::uint32_t a) {
    Activity& act = activities_[a];
    const ActivityKind kind = act.kind;
    const std::int32_t rank_class = act.rank_class;
    const std::uint32_t target = act.target;
    if (kind == ActivityKind::flow) {
      loads_.detach(act.route);
      for (int i = 0; i < act.route.count; ++i) mark_dirty(act.route.resources[i].rank_class);
    }
    activities_.unlist(a);
    activities_.release(a);
    switch (kind) {
      case ActivityKind::compute:
        finish_op(rank_class, target);
        return;
      case ActivityKind::delay:
        continue_run(target, true);
        return;
      case ActivityKind::host:
        launch(rank_class, target);
        return;
      case ActivityKind::issue:
        start_op(rank_class, target);
        return;
      case ActivityKind::flow:
        if (--runs_[target].flows_left == 0) {
          ++runs_[target].phase;
          continue_run(target, true);
        }
        return;
    }
  }

  void list(std::uint32_t a, int c) {
    activities_.list(a, c);
    mark_dirty(c);
  }

  void mark_dirty(int c) {
    if (classes_[c].dirty) return;
    classes_[c].dirty = true;
    dirty_.push_back(c);
  }

  // The slowest of what the communication running beside the class's compute (of interference band `band`) does to it.
  double compute_slowdown(int c, std::uint8_t band) const {
    const ClassRun& run = classes_[c];
    double slowdown = 1.0;
    for (std::uint8_t row : run.active_rows) slowdown = std::max(slowdown, flat_.interference.compute(row, band));
    if (run.active_by_kernel[static_cast<int>(CommKernel::userbuffers_sm)] > 0)
      slowdown = std::max(slowdown, flat_.classes[c].userbuffers_slowdown);
    return slowdown;
  }

  double rate_ns_per_unit(const Activity& act) const {
    if (act.kind == ActivityKind::compute) {
      // Concurrent compute ops (the two strands of double-strand) share the SMs equally.
      const ClassRun& run = classes_[act.rank_class];
      const double sharing = static_cast<double>(run.clock.compute_active());
      const std::uint8_t band = flat_.classes[act.rank_class].ops[act.target].interference;
      return compute_slowdown(act.rank_class, band) * sharing;
    }
    // NCCL's kernels share the SMs with the compute beside them (the slowest that a compute op of its classes does
    // to it); userbuffers keep SMs of their own or the copy engines, which a GEMM does not slow.
    const CommRun& comm = runs_[act.target];
    double slowdown = 1.0;
    if (comm.nccl)
      for (int c : act.listed_in)
        if (c >= 0)
          for (std::uint8_t band : classes_[c].active_bands)
            slowdown = std::max(slowdown, flat_.interference.communication(comm.interference_row, band));
    return loads_.ns_per_byte(act.route) * slowdown;
  }

  void refresh_dirty() {
    for (std::size_t d = 0; d < dirty_.size(); ++d) {
      ClassRun& run = classes_[dirty_[d]];
      run.dirty = false;
      for (std::uint32_t a : activities_.active(dirty_[d])) {
        Activity& act = activities_[a];
        const double ns_per_unit = rate_ns_per_unit(act);
        if (ns_per_unit == act.ns_per_unit) continue;
        const TimeNs elapsed = now_ - act.updated_ns;
        if (elapsed > 0) act.remaining = std::max(0.0, act.remaining - static_cast<double>(elapsed) / act.ns_per_unit);
        act.updated_ns = now_;
        act.ns_per_unit = ns_per_unit;
        queue_.schedule(a, later(now_, ceil_ns(act.remaining * ns_per_unit)));
      }
    }
    dirty_.clear();
  }

  const FlatIteration& flat_;
  const IterationGraph& graph_;
  const bool record_;
  TimeNs now_ = 0;
  EventQueue queue_;
  LinkLoads loads_;
  std::vector<ClassRun> classes_;
  ActivityPool activities_;
  std::vector<CommRun> runs_;
  std::vector<std::uint32_t> free_runs_;
  std::vector<int> dirty_;
  HostTimeline host_;  // ops made ready in classes with host time wait here for their host
};

}  // namespace

IterationResult run_engine(const FlatIteration& flat, const IterationGraph& graph, const SimOptions& options) {
  return Engine(flat, graph, options).run();
}

}  // namespace twin::sim
