/* squashctl: shows squashd's view of the node and releases leftover jobs. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "frame.h"
#include "quote.h"
#include "cli/json_escape.h"
#include "cli/squashctl_report.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: squashctl [OPTIONS] COMMAND\n"
		"Commands:\n"
		"  list [--json]    node-level mounts: image, mode, refcount, jobs (or linger time left)\n"
		"  job JOBID        where a job's images are mounted (its steps' view)\n"
		"  release JOBID    drop a job's mounts (root; for jobs whose epilog did not run)\n"
		"  gc               release every job Slurm says no longer runs here (root)\n"
		"  status [--json]  squashd's version, protocol and state file versions, uptime,\n"
		"                   mounts, jobs and counters\n"
		"  health           exit 0 when squashd is healthy; else one line per problem\n"
		"  metrics          counters in the Prometheus text format (node_exporter textfile)\n"
		"Options:\n"
		"  -s, --socket PATH        squashd socket (default " SQUASH_DEFAULT_SOCKET ")\n"
		"  -n, --no-munge           do not sign requests with MUNGE\n"
		"  -m, --munge-socket PATH  munged socket\n"
		"  -t, --timeout SECONDS    give up after this long (default 30)\n"
		"  -h, --help               this help\n");
}

static void json_string(const char *s)
{
	json_write_string(stdout, s);
}

/* Table output: control bytes as \xNN (quote.h), so a path cannot move
 * the cursor. */
static void print_safe(const char *s)
{
	size_t len = strlen(s), cap = len * 4 + 1;
	char *buf = malloc(cap);

	if (!buf)
		return;
	fputs(squash_quote(buf, cap, s, len), stdout);
	free(buf);
}

static void print_list_json(const Squash__Response *r)
{
	printf("{\"mounts\":[");
	for (size_t i = 0; i < r->n_mounts; i++) {
		const Squash__MountInfo *m = r->mounts[i];
		printf("%s{\"image\":", i ? "," : "");
		json_string(m->image);
		printf(",\"mode\":");
		json_string(squash_mode_name(m->mode));
		printf(",\"mount_point\":");
		json_string(m->mount_point);
		printf(",\"refcount\":%u,\"state\":", m->refcount);
		json_string(m->state ? m->state : "ready");
		printf(",\"jobs\":[");
		for (size_t j = 0; j < m->n_job_ids; j++)
			printf("%s%u", j ? "," : "", m->job_ids[j]);
		printf("],\"steps\":[");
		for (size_t j = 0; j < m->n_steps; j++) {
			printf("%s", j ? "," : "");
			json_string(m->steps[j]);
		}
		printf("],\"sessions\":[");
		for (size_t j = 0; j < m->n_session_pids; j++)
			printf("%s%d", j ? "," : "", m->session_pids[j]);
		printf("]");
		if (m->has_owner_uid)
			printf(",\"owner_uid\":%u", m->owner_uid);
		if (m->has_server_pid)
			printf(",\"server_pid\":%d", m->server_pid);
		if (m->has_linger_left_s)
			printf(",\"linger_left_s\":%u", m->linger_left_s);
		if (m->loop_device) {
			printf(",\"loop_device\":");
			json_string(m->loop_device);
		}
		if (m->reader) {
			printf(",\"reader\":");
			json_string(m->reader);
		}
		printf("}");
	}
	printf("]%s}\n", r->has_truncated && r->truncated ? ",\"truncated\":true" : "");
}

static void print_list_table(const Squash__Response *r)
{
	if (r->n_mounts == 0) {
		printf("no images mounted\n");
		return;
	}
	printf("%-6s %-4s %-12s %-14s %-36s %s\n", "MODE", "REFS", "JOBS", "SERVED BY", "READER",
	       "IMAGE -> MOUNT POINT");
	for (size_t i = 0; i < r->n_mounts; i++) {
		const Squash__MountInfo *m = r->mounts[i];
		char jobs[64] = "", by[32] = "-";
		size_t used = 0;
		for (size_t j = 0; j < m->n_job_ids && used < sizeof(jobs); j++)
			used += snprintf(jobs + used, sizeof(jobs) - used, "%s%u", j ? "," : "", m->job_ids[j]);
		/* Steps' own images (JOB.STEP) and squash-shell sessions (sPID). */
		for (size_t j = 0; j < m->n_steps && used < sizeof(jobs); j++)
			used += snprintf(jobs + used, sizeof(jobs) - used, "%s%s", used ? "," : "", m->steps[j]);
		for (size_t j = 0; j < m->n_session_pids && used < sizeof(jobs); j++)
			used += snprintf(jobs + used, sizeof(jobs) - used, "%ss%d", used ? "," : "",
					 m->session_pids[j]);
		if (m->has_linger_left_s && !used) /* nobody holds it: show when it goes */
			snprintf(jobs, sizeof(jobs), "linger %us", m->linger_left_s);
		if (m->loop_device)
			snprintf(by, sizeof(by), "%s", m->loop_device);
		else if (m->has_server_pid)
			snprintf(by, sizeof(by), "pid %d uid %u", m->server_pid, m->owner_uid);
		printf("%-6s %-4u %-12s %-14s %-36s ", squash_mode_name(m->mode), m->refcount,
		       jobs[0] ? jobs : "-", by, m->reader ? m->reader : "-");
		print_safe(m->image);
		printf(" -> ");
		print_safe(m->mount_point);
		putchar('\n');
	}
	if (r->has_truncated && r->truncated)
		fprintf(stderr, "squashctl: only the first %zu mounts are listed: squashd's answer holds "
			"at most %d KiB (squashctl status counts them all)\n", r->n_mounts,
			SQUASH_FRAME_MAX / 1024);
}

static int parse_job_id(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > UINT32_MAX) {
		fprintf(stderr, "squashctl: '%s' is not a job id\n", s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* A whole number of seconds from 1 to 3600, or -1 with a message. */
static int parse_seconds(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > 3600) {
		fprintf(stderr, "squashctl: --timeout takes whole seconds from 1 to 3600, not '%s'\n", s);
		return -1;
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"socket", required_argument, NULL, 's'},
		{"no-munge", no_argument, NULL, 'n'},
		{"munge-socket", required_argument, NULL, 'm'},
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct squash_client_options copts = {.use_munge = true, .munge_if_present = true, .timeout_ms = 30000};
	int opt;
	while ((opt = getopt_long(argc, argv, "+s:nm:t:h", options, NULL)) != -1) {
		switch (opt) {
		case 's': copts.socket_path = optarg; break;
		case 'n': copts.use_munge = false; break;
		case 'm': copts.munge_socket = optarg; break;
		case 't':
			copts.timeout_ms = parse_seconds(optarg);
			if (copts.timeout_ms < 0)
				return 2;
			copts.timeout_ms *= 1000;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind++];
	bool json = false;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__ListRequest list = SQUASH__LIST_REQUEST__INIT;
	Squash__StepInfoRequest info = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__ReleaseJobRequest release = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__GcRequest gc = SQUASH__GC_REQUEST__INIT;
	Squash__StatusRequest status = SQUASH__STATUS_REQUEST__INIT;
	bool health = false, metrics = false;
	if (!strcmp(cmd, "list")) {
		if (optind < argc && !strcmp(argv[optind], "--json")) {
			json = true;
			optind++;
		}
		req.op_case = SQUASH__REQUEST__OP_LIST;
		req.list = &list;
	} else if (!strcmp(cmd, "job") && optind < argc) {
		if (parse_job_id(argv[optind++], &info.job_id) < 0)
			return 2;
		req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
		req.step_info = &info;
	} else if (!strcmp(cmd, "release") && optind < argc) {
		if (parse_job_id(argv[optind++], &release.job_id) < 0)
			return 2;
		req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
		req.release_job = &release;
	} else if (!strcmp(cmd, "gc")) {
		req.op_case = SQUASH__REQUEST__OP_GC;
		req.gc = &gc;
	} else if (!strcmp(cmd, "status") || !strcmp(cmd, "health") || !strcmp(cmd, "metrics")) {
		if (!strcmp(cmd, "status") && optind < argc && !strcmp(argv[optind], "--json")) {
			json = true;
			optind++;
		}
		health = !strcmp(cmd, "health");
		metrics = !strcmp(cmd, "metrics");
		/* health also asks Slurm about the node's jobs (through squashd). */
		status.has_check_slurm = status.check_slurm = health;
		req.op_case = SQUASH__REQUEST__OP_STATUS;
		req.status = &status;
	} else {
		usage(stderr);
		return 2;
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	Squash__Response *resp = NULL;
	char err[1024];
	if (squash_client_call(&copts, &req, &resp, err, sizeof(err)) < 0) {
		if (health) {
			/* One line for NHC or HealthCheckProgram to show. */
			printf("squashd not answering: %s\n", err);
			return 2;
		}
		fprintf(stderr, "squashctl: %s\n", err);
		return 1;
	}
	int rc = 0;
	if (health && resp->status == SQUASH__STATUS__OK && resp->node) {
		for (size_t i = 0; i < resp->node->n_problems; i++)
			printf("%s\n", resp->node->problems[i]);
		/* Said, but healthy: the node needs no admin for it. */
		if (resp->node->registry_rebuilt)
			printf("note: registry rebuilt from the node at start: %s\n", resp->node->registry_rebuilt);
		for (size_t i = 0; i < resp->node->n_notes; i++)
			printf("note: %s\n", resp->node->notes[i]);
		if (resp->node->mounts_dead)
			printf("note: %u FUSE mount(s) whose reader died (its user's own process) still held by "
			       "their jobs; new jobs get fresh mounts (the journal says why each died)\n",
			       resp->node->mounts_dead);
		rc = resp->node->n_problems ? 1 : 0;
	} else if (health) {
		printf("squashd answered %s: %s\n", squash_status_name(resp->status),
		       resp->message ? resp->message : "(no reason given)");
		rc = 2;
	} else if (resp->status != SQUASH__STATUS__OK) {
		fprintf(stderr, "squashctl: %s: %s\n", squash_status_name(resp->status),
			resp->message ? resp->message : "(no reason given)");
		rc = 1;
	} else if (req.op_case == SQUASH__REQUEST__OP_LIST) {
		if (json)
			print_list_json(resp);
		else
			print_list_table(resp);
	} else if (req.op_case == SQUASH__REQUEST__OP_STEP_INFO) {
		for (size_t i = 0; i < resp->n_job_mounts; i++)
			printf("%s %s %s (%s)\n", resp->job_mounts[i]->image, resp->job_mounts[i]->target,
			       resp->job_mounts[i]->source, squash_mode_name(resp->job_mounts[i]->mode));
	} else if (req.op_case == SQUASH__REQUEST__OP_GC) {
		for (size_t i = 0; i < resp->n_released_job_ids; i++)
			printf("released job %u\n", resp->released_job_ids[i]);
		if (resp->n_released_job_ids == 0)
			printf("nothing to release\n");
	} else if (req.op_case == SQUASH__REQUEST__OP_STATUS && resp->node) {
		if (metrics)
			print_metrics(stdout, resp->node);
		else if (json)
			print_status_json(stdout, resp->node);
		else
			print_status(stdout, resp->node);
	} else if (resp->message) {
		printf("%s\n", resp->message);
	}
	squash__response__free_unpacked(resp, NULL);
	return rc;
}
