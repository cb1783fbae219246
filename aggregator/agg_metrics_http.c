/*
 * agg_metrics_http.c - the aggregator's /metrics endpoint on nng's HTTP
 * server: answers GET /metrics with agg_metrics_render() on nng's threads
 * (see agg_metrics.h). nng's server is used rather than hand-written HTTP:
 * it already parses requests, bounds their size and runs the connections.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "agg_metrics.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "banned.h"

struct agg_metrics_http {
	nng_http_server *srv;
};

static void amh_handle(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct agg_metrics *m = nng_http_handler_get_data(h);
	nng_http_res *res = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rv = f ? 0 : NNG_ENOMEM;

	if (f) {
		if (agg_metrics_render(m, f, (int64_t)rm_clock_mono_ns()) != RM_OK)
			rv = NNG_EINTERNAL;
		if (fclose(f) != 0)
			rv = NNG_ENOMEM;
	}
	if (rv == 0 && (rv = nng_http_res_alloc(&res)) == 0 &&
	    (rv = nng_http_res_set_header(res, "Content-Type", "text/plain; version=0.0.4; charset=utf-8")) == 0)
		rv = nng_http_res_copy_data(res, buf, len);
	free(buf);
	if (rv != 0) {
		if (res)
			nng_http_res_free(res);
		if (nng_http_res_alloc_error(&res, NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR) != 0) {
			nng_aio_finish(aio, rv);
			return;
		}
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

int agg_metrics_http_open(struct agg_metrics_http **out, const char *listen, struct agg_metrics *m)
{
	struct agg_metrics_http *h;
	nng_http_handler *hd = NULL;
	nng_sockaddr sa;
	nng_url *url = NULL;
	char buf[300];
	int rv;

	if (!out)
		return RM_EINVAL;
	*out = NULL;
	if (!listen || !m || !listen[0]) {
		rm_log_error("failed to serve metrics on '%s': no address", listen ? listen : "");
		return RM_EINVAL;
	}
	if ((size_t)snprintf(buf, sizeof(buf), "%s%s", strncmp(listen, "http://", 7) ? "http://" : "", listen) >=
		    sizeof(buf) ||
	    nng_url_parse(&url, buf) != 0 || strcmp(url->u_scheme, "http") || !url->u_port[0] ||
	    (url->u_path[0] && strcmp(url->u_path, "/"))) {
		rm_log_error("failed to serve metrics on '%s': not HOST:PORT or http://HOST:PORT", listen);
		nng_url_free(url);
		return RM_EINVAL;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		nng_url_free(url);
		return RM_ENOMEM;
	}
	rv = nng_http_server_hold(&h->srv, url);
	nng_url_free(url);
	if (rv == 0 && (rv = nng_http_handler_alloc(&hd, "/metrics", amh_handle)) == 0) {
		if ((rv = nng_http_handler_set_data(hd, m, NULL)) != 0 ||
		    (rv = nng_http_server_add_handler(h->srv, hd)) != 0)
			nng_http_handler_free(hd);
	}
	if (rv == 0)
		rv = nng_http_server_start(h->srv);
	if (rv != 0) {
		rm_log_error("failed to serve metrics on '%s': %s", listen, nng_strerror(rv));
		if (h->srv)
			nng_http_server_release(h->srv);
		free(h);
		return RM_EIO;
	}
	if (nng_http_server_get_addr(h->srv, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		const uint8_t *a = (const uint8_t *)&sa.s_in.sa_addr;

		rm_log_info("serving metrics on http://%u.%u.%u.%u:%u/metrics", a[0], a[1], a[2], a[3],
			    (unsigned)ntohs(sa.s_in.sa_port));
	} else {
		rm_log_info("serving metrics on %s/metrics", buf);
	}
	*out = h;
	return RM_OK;
}

void agg_metrics_http_close(struct agg_metrics_http *h)
{
	if (!h)
		return;
	nng_http_server_stop(h->srv);
	nng_http_server_release(h->srv);
	free(h);
}
