// Descriptors between the loader's processes: one passed over a Unix socket (SCM_RIGHTS), and
// every other one closed in a process that must hold only its own.
#pragma once

#include <sys/types.h>

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

}  // namespace xcargo::loader::sandbox
