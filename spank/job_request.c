/* Prolog and epilog requests to squashd (see job_request.h). */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "imagespec.h"
#include "job_array.h"
#include "job_request.h"
#include "path_pattern.h"
#include "prolog_note.h"
#include "squash_env.h"


/* Reads a decimal id from the environment. */
static int env_id(const char *name, uint32_t *out)
{
	const char *text = getenv(name);
	char *end;
	unsigned long v;

	if (!text || !*text)
		return -1;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || *end || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* The job id and owner. spank_get_item answers both in job_script context;
 * the prolog environment is the fallback. */
static int job_identity(spank_t sp, uint32_t *job_id, uint32_t *uid)
{
	uid_t u;

	if (spank_get_item(sp, S_JOB_ID, job_id) != ESPANK_SUCCESS &&
	    env_id("SLURM_JOB_ID", job_id)) {
		slurm_error("spank_squash: cannot tell the job id (no S_JOB_ID, no SLURM_JOB_ID)");
		return -1;
	}
	if (spank_get_item(sp, S_JOB_UID, &u) == ESPANK_SUCCESS) {
		*uid = (uint32_t)u;
		return 0;
	}
	if (env_id("SLURM_JOB_UID", uid)) {
		slurm_error("spank_squash: job %u: cannot tell the job's user (no S_JOB_UID, no SLURM_JOB_UID)",
			    *job_id);
		return -1;
	}
	return 0;
}

/* Sends req (retrying while squashd is unreachable, see retry=) and logs
 * anything but OK. Returns the status, or -1 when squashd could not be
 * asked; then why holds the reason. */
static int ask(const struct squash_settings *s, const Squash__Request *req,
	       uint32_t job_id, const char *what, char *why, size_t whylen)
{
	struct squash_client_options opts = squash_settings_client(s);
	Squash__Response *resp = NULL;
	int status;

	if (squash_client_call_retry(&opts, req, &resp, NULL, why, whylen)) {
		slurm_error("spank_squash: job %u: cannot %s: %s", job_id, what, why);
		return -1;
	}
	status = resp->status;
	if (status == SQUASH__STATUS__USER_ERROR)
		/* The job's own mistake: its steps will report it; the node is fine. */
		slurm_info("spank_squash: job %u: cannot %s: %s", job_id, what,
			   resp->message ? resp->message : "(no reason given)");
	else if (status != SQUASH__STATUS__OK)
		slurm_error("spank_squash: job %u: cannot %s: squashd answered %s: %s",
			    job_id, what, squash_status_name(resp->status),
			    resp->message ? resp->message : "(no reason given)");
	squash__response__free_unpacked(resp, NULL);
	return status;
}

/* The submit check always fills in targets; a list that lacks some is
 * completed the same way (squashd checks the result anyway). */
static int fill_targets(const struct squash_settings *s, uint32_t job_id,
			struct squash_image_list *list)
{
	char buf[SQUASH_PATH_MAX], why[256];

	for (size_t i = 0; i < list->count; i++) {
		struct squash_image_spec *item = &list->items[i];

		if (item->target)
			continue;
		if (squash_default_target(item->image, s->default_target, buf,
					  sizeof buf, why, sizeof why)) {
			slurm_info("spank_squash: job %u: %s: %s", job_id, item->image, why);
			return -1;
		}
		item->target = strdup(buf);
		if (!item->target) {
			slurm_error("spank_squash: job %u: out of memory", job_id);
			return -1;
		}
	}
	return 0;
}

/* The array ids, when a path uses %a or %A (asking costs an RPC). */
static int array_ids(const struct squash_image_list *list, struct squash_pattern_values *v,
		     char *why, size_t whylen)
{
	for (size_t i = 0; i < list->count; i++)
		if (squash_pattern_needs_array(list->items[i].image) ||
		    (list->items[i].target && squash_pattern_needs_array(list->items[i].target)))
			return squash_job_array_ids(v->job_id, &v->is_array, &v->array_job_id,
						    &v->array_task_id, why, whylen);
	return 0;
}

/* Expands one field of the list in place (every path is a pattern; the
 * submit check doubled the '%' of plain paths). */
static int expand_field(char **field, const struct squash_pattern_values *v,
			char *why, size_t whylen)
{
	char buf[SQUASH_PATH_MAX];
	char *copy;

	if (!*field)
		return 0;
	if (squash_pattern_expand(*field, v, buf, sizeof buf, why, whylen))
		return -1;
	copy = strdup(buf);
	if (!copy) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	free(*field);
	*field = copy;
	return 0;
}

/* Expands %a %A %j %u and %% for this job (path_pattern.h). On failure the
 * reason is left for the job's steps, which print it. */
static int expand_patterns(const struct squash_settings *s,
			   uint32_t job_id, uint32_t uid,
			   struct squash_image_list *list)
{
	struct squash_pattern_values v = { .have_job = true, .job_id = job_id };
	struct passwd pw, *res = NULL;
	char pwbuf[4096], why[1024], note[1100];

	if (array_ids(list, &v, why, sizeof why)) {
		slurm_error("spank_squash: job %u: %s", job_id, why);
		snprintf(note, sizeof note, "%s", why);
		prolog_note_write(s, job_id, note);
		return -1;
	}
	if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
		v.user = res->pw_name;
	else
		v.user = getenv("SLURM_JOB_USER");
	for (size_t i = 0; i < list->count; i++) {
		if (expand_field(&list->items[i].image, &v, why, sizeof why) ||
		    expand_field(&list->items[i].target, &v, why, sizeof why)) {
			slurm_info("spank_squash: job %u: %s", job_id, why);
			snprintf(note, sizeof note, "cannot expand the image pattern: %s", why);
			prolog_note_write(s, job_id, note);
			return -1;
		}
	}
	return 0;
}

/* Out of memory before squashd was asked: logged, and left for the job's
 * steps, which print it (as when squashd could not be reached). */
static void out_of_memory(const struct squash_settings *s, uint32_t job_id, const char *what)
{
	char note[256];

	slurm_error("spank_squash: job %u: out of memory for %s", job_id, what);
	snprintf(note, sizeof note, "out of memory for %s on this node", what);
	prolog_note_write(s, job_id, note);
}

/* Builds the MountJobRequest from the complete list and sends it (from a
 * step: from_step). Returns squashd's status, or -1 when it could not be
 * asked. */
static int mount_job(const struct squash_settings *s, uint32_t job_id,
		     uint32_t uid, const struct squash_image_list *list, bool from_step)
{
	/* Heap, not stack (up to SQUASH_MAX_IMAGES of each, in slurmd). */
	Squash__ImageSpec *specs = calloc(list->count ? list->count : 1, sizeof(*specs));
	Squash__ImageSpec **ptrs = calloc(list->count ? list->count : 1, sizeof(*ptrs));
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	char why[768], note[1024];
	int status = -1;

	if (!specs || !ptrs) {
		out_of_memory(s, job_id, "the request to mount the job's images");
		goto out;
	}
	for (size_t i = 0; i < list->count; i++) {
		squash__image_spec__init(&specs[i]);
		specs[i].image = list->items[i].image;
		specs[i].target = list->items[i].target;
		specs[i].has_writable = specs[i].writable = list->items[i].writable;
		specs[i].upper = list->items[i].upper;
		ptrs[i] = &specs[i];
	}
	mount.job_id = job_id;
	mount.uid = uid;
	mount.n_images = list->count;
	mount.images = ptrs;
	mount.has_from_step = mount.from_step = from_step;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	status = ask(s, &req, job_id, "mount the job's images", why, sizeof why);
	if (status == SQUASH__STATUS__OK) {
		slurm_verbose("spank_squash: job %u: %zu image(s) mounted", job_id,
			      list->count);
	} else if (status < 0) {
		/* squashd never heard of the job: tell its steps why. */
		snprintf(note, sizeof note, "the job prolog could not reach squashd: %s", why);
		prolog_note_write(s, job_id, note);
	}
out:
	free(ptrs);
	free(specs);
	return status;
}

/* Parses the canonical list, expands its patterns, fills in default
 * targets and asks squashd to mount it for the job. Returns squashd's
 * status, or -1 when the list is bad or squashd could not be asked. */
static int mount_listed_images(const struct squash_settings *s, uint32_t job_id,
			       uint32_t uid, const char *text, bool from_step)
{
	/* Heap, not stack: room for SQUASH_MAX_IMAGES items. */
	struct squash_image_list *list = malloc(sizeof(*list));
	char why[512];
	int status = -1;

	if (!list) {
		out_of_memory(s, job_id, "the job's list of images");
		return -1;
	}
	if (squash_imagespec_parse(text, list, why, sizeof why)) {
		slurm_info("spank_squash: job %u: bad list of images: %s", job_id, why);
		free(list);
		return -1;
	}
	if (expand_patterns(s, job_id, uid, list) == 0 &&
	    fill_targets(s, job_id, list) == 0)
		status = mount_job(s, job_id, uid, list, from_step);
	squash_imagespec_free(list);
	free(list);
	return status;
}

int squash_job_prolog(spank_t sp, const struct squash_settings *s)
{
	const char *text = squash_env_job_images(true);
	uint32_t job_id, uid;

	if (!text)
		return 0; /* the job did not ask for images */
	if (job_identity(sp, &job_id, &uid))
		return 0;
	mount_listed_images(s, job_id, uid, text, false);
	return 0; /* never drain the node; steps report failures */
}

int squash_job_mount_late(spank_t sp, const struct squash_settings *s,
			  uint32_t job_id, uint32_t uid)
{
	char *text = malloc(SQUASH_OPTION_MAX + 1);
	int status = -1;

	if (text && (spank_getenv(sp, SQUASH_ENV_JOB_IMAGES_STEP, text, SQUASH_OPTION_MAX + 1) ==
		     ESPANK_SUCCESS ||
		     spank_getenv(sp, SQUASH_ENV_JOB_IMAGES_STEP_0_1, text, SQUASH_OPTION_MAX + 1) ==
		     ESPANK_SUCCESS)) {
		slurm_info("spank_squash: job %u: its prolog did not mount its images on this node; "
			   "mounting them for its step now", job_id);
		status = mount_listed_images(s, job_id, uid, text, true);
	}
	free(text);
	return status;
}

int squash_job_epilog(spank_t sp, const struct squash_settings *s)
{
	Squash__ReleaseJobRequest release = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	uint32_t job_id, uid;
	/* A note goes with its job whatever the epilog sees: a step may have
	 * left one for images that the job's own environment does not show
	 * (a late mount's failure), and /run is not cleaned until a reboot. */
	bool noted = spank_get_item(sp, S_JOB_ID, &job_id) == ESPANK_SUCCESS;

	if (noted)
		prolog_note_remove(s, job_id);
	if (!squash_env_job_images(true))
		return 0;
	if (job_identity(sp, &job_id, &uid))
		return 0;
	if (!noted) /* known from SLURM_JOB_ID only */
		prolog_note_remove(s, job_id);
	release.job_id = job_id;
	req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
	req.release_job = &release;
	char why[768];
	if (ask(s, &req, job_id, "release the job's images", why, sizeof why) < 0)
		slurm_error("spank_squash: job %u: squashd's periodic reconciliation with Slurm "
			    "will release the job's mounts once squashd answers again", job_id);
	return 0; /* a stuck release is squashd's to clean up, not a reason to drain */
}
