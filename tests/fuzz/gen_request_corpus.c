/* Writes valid request frames (one file each) into the directory given as
 * argv[1]: seeds for fuzz_request and fuzz_frame. Built and run by
 * make_corpus.sh; the outputs are committed under corpus/. */
#include <stdio.h>
#include <stdlib.h>

#include "client.h"
#include "frame.h"

static void write_file(const char *dir, const char *name, const uint8_t *buf,
		       size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void write_request(const char *dir, const char *name,
			  const Squash__Request *req)
{
	static uint8_t frame[SQUASH_FRAME_MAX];
	struct squash_client_options opts = { 0 };
	char err[256];
	size_t len;
	unsigned char *payload = squash_client_pack_request(&opts, req, &len, err,
							    sizeof(err));
	long n;

	if (!payload) {
		fprintf(stderr, "%s: %s\n", name, err);
		exit(1);
	}
	n = squash_frame_encode(frame, sizeof(frame), SQUASH_FRAME_REQUEST,
				payload, len);
	if (n < 0)
		exit(1);
	write_file(dir, name, frame, (size_t)n);
	free(payload);
}

int main(int argc, char **argv)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__StepInfoRequest step = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__ReleaseJobRequest release = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__ListRequest list = SQUASH__LIST_REQUEST__INIT;
	Squash__ImageSpec specs[2] = { SQUASH__IMAGE_SPEC__INIT,
				       SQUASH__IMAGE_SPEC__INIT };
	Squash__ImageSpec *spec_ptrs[2] = { &specs[0], &specs[1] };
	Squash__Response resp = SQUASH__RESPONSE__INIT;
	uint8_t buf[512];
	size_t len;
	long n;
	static uint8_t frame[SQUASH_FRAME_MAX];

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	specs[0].image = "/home/alice/tools.sqfs";
	specs[0].target = "/squash/tools";
	specs[1].image = "/data/ref.squashfs";
	specs[1].target = "/squash/ref";
	mount.job_id = 4242;
	mount.uid = 1000;
	mount.n_images = 2;
	mount.images = spec_ptrs;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	write_request(argv[1], "mount_job", &req);

	mount.n_images = 0;
	write_request(argv[1], "mount_job_empty", &req);

	step.job_id = 4242;
	req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
	req.step_info = &step;
	write_request(argv[1], "step_info", &req);

	release.job_id = 4242;
	req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
	req.release_job = &release;
	write_request(argv[1], "release_job", &req);

	req.op_case = SQUASH__REQUEST__OP_LIST;
	req.list = &list;
	write_request(argv[1], "list", &req);

	/* A response frame: fuzz_frame parses both kinds. */
	resp.status = SQUASH__STATUS__USER_ERROR;
	resp.message = "image is truncated";
	len = squash__response__pack(&resp, buf);
	n = squash_frame_encode(frame, sizeof(frame), SQUASH_FRAME_RESPONSE, buf, len);
	if (n < 0)
		return 1;
	write_file(argv[1], "response_user_error", frame, (size_t)n);
	return 0;
}
