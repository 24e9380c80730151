/* squash-reader --serve out of its user's reach by ptrace.
 *
 * squashd starts each user's reader as that user, and a process of one's
 * own uid may be traced: a user could stop single threads of their reader
 * (the process stays running, so squashd's check of stopped readers sees
 * nothing, while the requests of squashd's mounts and overlays wait on the
 * stopped threads for good), or take a copy of its /dev/fuse descriptor
 * (pidfd_getfd) and read requests off the connection without answering,
 * where no kill of the reader ends them. Like ssh-agent, the reader makes
 * itself non-dumpable: tracing it, reading its memory or taking its
 * descriptors then needs CAP_SYS_PTRACE, which users lack. Its core dumps
 * go too. */
#ifndef SQUASH_READER_UNTRACEABLE_H
#define SQUASH_READER_UNTRACEABLE_H

#include <stddef.h>

/* Makes this process non-dumpable; -1 with err set when that fails or a
 * tracer not root's attached before it (between the execve and here),
 * which stays attached whatever is set now: such a reader must not serve.
 * Installed as a file its users cannot read (mode 0711), the reader is
 * non-dumpable from its execve on and this is a second wall. */
int reader_make_untraceable(char *err, size_t errlen);

#endif
