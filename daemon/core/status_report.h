/* The operations view added to a status answer: settings in force, mounts
 * by mode and state, FUSE servers, loop devices, request counters and
 * answer times, and the node checks behind `squashctl health` (state
 * directory space, loop devices, optionally jobs Slurm says are gone). */
#ifndef SQUASHD_STATUS_REPORT_H
#define SQUASHD_STATUS_REPORT_H

#include "core/job_mounts.h"

/* After job_mounts_status(): adds fields 20-26 and problems to out. */
void status_report_extend(struct daemon_state *ds, const Squash__StatusRequest *req,
			  struct reply *out);

/* Frees what status_report_extend allocated (any reply; safe to repeat). */
void status_report_free(struct reply *out);

/* The configuration in force as key/value text, one per setting (for the
 * status answer and the reload log). Returns how many were filled. */
#define SETTINGS_SHOWN_MAX 24
struct setting_text {
	const char *key;
	char value[PATH_MAX * 2];
};
size_t settings_describe(const struct squashd_config *cfg, struct setting_text *out, size_t cap);

#endif
