// The UCX functions libcargo calls, loaded with dlopen on first use: programs that never
// connect anywhere (`xcargo verify`, `xcargo build`) do not pay for loading UCX (~1.3 ms).
#pragma once

#include <ucp/api/ucp.h>

namespace xcargo::net {

#define XC_UCX_FUNCTIONS(X)                                                                                       \
  X(ucp_config_read) X(ucp_config_modify) X(ucp_config_release) X(ucp_init_version) X(ucp_cleanup)                \
  X(ucp_worker_create) X(ucp_worker_destroy) X(ucp_worker_get_efd) X(ucp_worker_arm) X(ucp_worker_progress)       \
  X(ucp_worker_set_am_recv_handler) X(ucp_ep_create) X(ucp_ep_close_nbx) X(ucp_am_send_nbx)                       \
  X(ucp_am_recv_data_nbx) X(ucp_request_free) X(ucp_request_cancel) X(ucp_request_check_status)                   \
  X(ucp_listener_create) X(ucp_listener_destroy) X(ucp_listener_query) X(ucp_conn_request_query)                  \
  X(ucp_worker_get_address) X(ucp_worker_release_address) X(ucp_ep_rkey_unpack) X(ucp_rkey_destroy) X(ucp_get_nbx) \
  X(ucp_context_print_info) X(ucs_status_string)

struct UcxApi {
#define XC_UCX_MEMBER(name) decltype(&::name) name;
  XC_UCX_FUNCTIONS(XC_UCX_MEMBER)
#undef XC_UCX_MEMBER
};

// The loaded functions, or nullptr (with *why set) when UCX's libraries cannot be loaded.
const UcxApi* ucx_api(const char** why = nullptr);

}  // namespace xcargo::net

// Calls through the table: UCX->ucp_worker_progress(w). Only after UcxWorker::create()
// succeeded, which checks that the table loaded.
#define UCX (::xcargo::net::ucx_api())

namespace xcargo::net {

}  // namespace xcargo::net
