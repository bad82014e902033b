// Ranks that wander apart and wait for each other. A GPU held at its power limit swings its SM clock on its own
// (docs/ACCURACY.md: 1,440-1,635 MHz in 200 ms samples of one H200's training steps), so ranks that computed the
// same work since they last synchronised arrive at their next collective at different times, and the collective
// starts when the last arrives. With each rank's compute time c (1 + s z), z standard normal and s the clock's
// relative spread, the last of n arrives E[max of n z] s c after the mean: a wait that grows with the group (0
// for one rank, 1.4 s c for 8, 3.0 s c for 512) and with the compute between synchronisations, which is why
// it weighs on sharded data parallelism (a gather per layer over every data-parallel rank) and barely on a
// gradient reduction hidden under the backward.
#pragma once

namespace twin::sim {

// E[max of `ranks` independent standard normals] by Blom's approximation, the normal quantile at
// (n - 0.375) / (n + 0.25): 4.4% high at 2 ranks, 1.4% at 5, under 1% from 10. 0 for one rank.
double expected_largest_of_normals(int ranks);

// The wait of a collective over `ranks` ranks as a share of the compute since they last synchronised:
// `clock_spread` x expected_largest_of_normals(ranks).
double arrival_wait_share(double clock_spread, int ranks);

}  // namespace twin::sim
