/* The plugin's settings, given as arguments on its plugstack.conf line:
 *
 *     required spank_squash.so socket=/run/squashd/squashd.sock timeout=30
 *
 * Every context parses them, so a typo is caught wherever the plugin loads. */
#ifndef SPANK_SQUASH_PLUGIN_SETTINGS_H
#define SPANK_SQUASH_PLUGIN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "client.h"
#include "target.h"

#define SQUASH_DEFAULT_TIMEOUT 30
#define SQUASH_MAX_TIMEOUT 600
/* How long the prolog, steps and epilog keep trying to reach squashd (a
 * restart takes a second or two; a node reboot of squashd's unit a few). */
#define SQUASH_DEFAULT_RETRY 60
#define SQUASH_MAX_RETRY 3600

struct squash_settings {
	char *socket_path;               /* squashd's socket */
	char *default_target;            /* BASE of derived targets BASE/NAME */
	struct squash_prefixes allowed;  /* where targets may lie */
	bool use_munge;                  /* sign requests to squashd */
	bool munge_if_present;           /* munge=auto: only where munged runs */
	char *munge_socket;              /* NULL: libmunge's default */
	int timeout;                     /* seconds per squashd request */
	int retry;                       /* seconds to keep retrying an unreachable squashd */
};

/* Parses the plugstack.conf arguments into s (which is reset first).
 * Returns 0, or -1 with a message for slurmd's log or the user in err. */
int squash_settings_parse(int ac, char **av, struct squash_settings *s,
			  char *err, size_t errlen);

void squash_settings_free(struct squash_settings *s);

/* The client options that talk to squashd as the settings say. */
struct squash_client_options
squash_settings_client(const struct squash_settings *s);

#endif
