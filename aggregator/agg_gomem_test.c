/*
 * agg_gomem_test.c - the Go label rule's memory of sockets: what is put is
 * found by node and cookie (the same cookie on two nodes is two entries),
 * a full memory forgets the least recently used (a touch or a put keeps
 * one), and a memory many times its size stays exact against a plain model
 * of the same rule.
 */
#include <stdio.h>
#include <string.h>

#include "agg_gomem.h"
#include "rm_err.h"
#include "rm_test.h"
#include "banned.h"

static void test_find_put(void)
{
	struct agg_gomem *m = NULL;
	struct agg_gomem_val *v, *w;

	CU_ASSERT_EQUAL(agg_gomem_open(&m, 0), RM_EINVAL);
	CU_ASSERT_EQUAL_FATAL(agg_gomem_open(&m, 4), RM_OK);
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n1", 7));
	CU_ASSERT_PTR_NOT_NULL_FATAL(v = agg_gomem_put(m, "n1", 7));
	CU_ASSERT_EQUAL(v->win, 0); /* made zeroed */
	v->key = "c1";
	v->is_ce = 1;
	v->win = 10;
	v->cpu = 500;
	CU_ASSERT_PTR_EQUAL(agg_gomem_find(m, "n1", 7), v);
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n2", 7)); /* another node's socket */
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n1", 8));
	CU_ASSERT_PTR_NOT_NULL_FATAL(w = agg_gomem_put(m, "n2", 7));
	CU_ASSERT(w != v);
	CU_ASSERT_PTR_EQUAL(agg_gomem_put(m, "n1", 7), v); /* put of a known one: the same entry, kept */
	CU_ASSERT_EQUAL(v->cpu, 500);
	CU_ASSERT_STRING_EQUAL(v->key, "c1");
	CU_ASSERT_EQUAL(agg_gomem_count(m), 2);
	agg_gomem_close(m);
	agg_gomem_close(NULL);
}

static void test_lru(void)
{
	struct agg_gomem *m = NULL;
	struct agg_gomem_val *v;
	uint64_t c;

	CU_ASSERT_EQUAL_FATAL(agg_gomem_open(&m, 3), RM_OK);
	for (c = 1; c <= 3; c++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(v = agg_gomem_put(m, "n", c));
		v->cpu = c;
	}
	/* 1 touched, 2 put again: 3 is the least recently used */
	agg_gomem_touch(m, agg_gomem_find(m, "n", 1));
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_put(m, "n", 2));
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_put(m, "n", 4));
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n", 3));
	CU_ASSERT_EQUAL(agg_gomem_count(m), 3);
	/* then 1 (touched before 2 was put) */
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_put(m, "n", 5));
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n", 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(v = agg_gomem_find(m, "n", 2));
	CU_ASSERT_EQUAL(v->cpu, 2);
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_find(m, "n", 4));
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_find(m, "n", 5));
	/* a touch of the most recent one changes nothing */
	agg_gomem_touch(m, agg_gomem_find(m, "n", 5));
	CU_ASSERT_PTR_NOT_NULL(agg_gomem_put(m, "n", 6));
	CU_ASSERT_PTR_NULL(agg_gomem_find(m, "n", 2));
	agg_gomem_close(m);
}

/* The model: the same rule by a use counter and linear search. */
#define MODEL_CAP 64
static struct {
	char node[8];
	uint64_t cookie, used, cpu;
	int on;
} model[MODEL_CAP];
static uint64_t tick;

static int model_find(const char *node, uint64_t cookie)
{
	int i;

	for (i = 0; i < MODEL_CAP; i++)
		if (model[i].on && model[i].cookie == cookie && !strcmp(model[i].node, node))
			return i;
	return -1;
}

static int model_put(const char *node, uint64_t cookie)
{
	int i = model_find(node, cookie), j;

	if (i < 0) {
		for (i = 0, j = 0; j < MODEL_CAP; j++) {
			if (!model[j].on) {
				i = j;
				break;
			}
			if (model[j].used < model[i].used)
				i = j;
		}
		snprintf(model[i].node, sizeof(model[i].node), "%s", node);
		model[i].cookie = cookie;
		model[i].cpu = 0;
		model[i].on = 1;
	}
	model[i].used = ++tick;
	return i;
}

static void test_model(void)
{
	static const char *nodes[] = { "a", "b", "c" };
	struct agg_gomem *m = NULL;
	uint64_t x = 88172645463325252ULL;
	int step, bad = 0;

	CU_ASSERT_EQUAL_FATAL(agg_gomem_open(&m, MODEL_CAP), RM_OK);
	memset(model, 0, sizeof(model));
	for (step = 0; step < 200000 && !bad; step++) {
		const char *node;
		uint64_t cookie;
		struct agg_gomem_val *v;
		int i, op;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		node = nodes[x % 3];
		cookie = (x >> 8) % 150 + 1; /* 450 sockets through 64 places */
		op = (int)((x >> 32) % 3);
		v = agg_gomem_find(m, node, cookie);
		i = model_find(node, cookie);
		if ((v != NULL) != (i >= 0) || (v && v->cpu != model[i].cpu)) {
			bad = 1;
			break;
		}
		if (op == 0 && v) {
			agg_gomem_touch(m, v);
			model[i].used = ++tick;
		} else if (op == 1) {
			CU_ASSERT_PTR_NOT_NULL_FATAL(v = agg_gomem_put(m, node, cookie));
			i = model_put(node, cookie);
			v->cpu = model[i].cpu = (uint64_t)step;
		}
	}
	if (bad)
		fprintf(stderr, "the memory and its model part at step %d\n", step);
	CU_ASSERT_FALSE(bad);
	CU_ASSERT_EQUAL(agg_gomem_count(m), MODEL_CAP);
	agg_gomem_close(m);
}

static CU_TestInfo cases[] = {
	{ "what is put is found by node and cookie", test_find_put },
	{ "a full memory forgets the least recently used", test_lru },
	{ "many times its size: the same as a plain model of the rule", test_model },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_gomem", cases)
