// Between the loader's processes: a descriptor passed over a Unix socket (SCM_RIGHTS), every
// other one closed in a process that must hold only its own, and a child's end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace xcargo::loader::sandbox {

// Sends `message` (one packet on a SOCK_SEQPACKET socket) with fd attached; false unless all
// of it was sent (errno says why).
bool send_fd(int socket, int fd, std::string_view message);
// Receives one message into buf and at most one descriptor (*fd, close-on-exec; -1 if none):
// recvmsg's result, retried on EINTR.
ssize_t receive_fd(int socket, char* buf, size_t size, int* fd);
// Closes every descriptor from 3 on but those in keep.
void close_all_but(std::vector<int> keep);

// How a child ended, from waitpid's status: "exited with status N" or "killed by signal N (NAME)".
std::string exit_text(int wait_status);
// Waits (every 5 ms) for child pid to end; once `grace` has passed, kills it (SIGKILL) and
// waits on. Returns its wait status (0 if it cannot be waited for).
int reap_within(pid_t pid, std::chrono::milliseconds grace);

}  // namespace xcargo::loader::sandbox
