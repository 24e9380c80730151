/* SIGHUP (systemctl reload): re-reads squashd.conf and applies the settings
 * that can change under running requests (plain numbers and flags each read
 * once per use): gc_interval (between non-zero values), request_timeout,
 * max_images_per_job, max_loop_devices, debug. Every other changed setting
 * (paths, prefixes, modes, MUNGE, Slurm) is logged as needing a restart and
 * stays as it was. A file that does not load changes nothing. */
#ifndef SQUASHD_RELOAD_H
#define SQUASHD_RELOAD_H

#include <stdbool.h>

#include "settings/settings.h"

/* Remembers the file's text as loaded at start (what is in force). */
void reload_init(struct squashd_config *live, const char *path, bool must_exist,
		 bool debug_forced);

/* The SIGHUP handler (server_on_reload); arg is unused. */
void reload_settings(void *arg);

#endif
