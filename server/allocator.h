// The C library allocator tuned for a long-lived prediction server
// (glibc; a no-op elsewhere). A prediction allocates and frees a few
// megabytes of graph and timeline; by default glibc gives each new thread an
// arena of its own (up to 8 per core) and hands freed memory back to the
// kernel, so a call landing on another gRPC thread starts from cold, unmapped
// pages: the same MT-NLG 530B plan simulated in 235 us through the RPC
// against 95 us in a loop (tests/bench/service_benchmark.cc). Capping the
// arenas at the cores and keeping freed memory (up to 1 GiB an arena) brings
// the RPC to about 110 us. GLIBC_TUNABLES still override it.
#ifndef VTRAIN_SERVER_ALLOCATOR_H_
#define VTRAIN_SERVER_ALLOCATOR_H_

namespace vtrain::server {

// Call first in main, before any thread starts. `cores`: 0 for the
// machine's hardware threads.
void TuneAllocatorForServing(int cores = 0);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_ALLOCATOR_H_
