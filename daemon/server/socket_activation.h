/* systemd socket activation (squashd.socket): systemd owns the listening
 * socket, so clients queue in its backlog while squashd restarts. */
#ifndef SQUASHD_SOCKET_ACTIVATION_H
#define SQUASHD_SOCKET_ACTIVATION_H

#include <stddef.h>

/* The listening socket systemd passed (LISTEN_FDS/LISTEN_PID), made
 * non-blocking; -1 when none was passed (squashd binds its own); -2 with
 * err when what was passed is not one listening unix SOCK_SEQPACKET
 * socket. Warns when its path is not configured_path. */
int socket_activation_fd(const char *configured_path, char *err, size_t errlen);

#endif
