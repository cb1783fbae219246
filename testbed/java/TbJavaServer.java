/*
 * TbJavaServer - the testbed's JVM HTTP server: one Java process shared by
 * the tenants (CEs), which keeps its own ground truth per CE in tb-server's
 * CSV format (testbed/tb_truth.h: ce,requests,cpu_ns,rx_bytes,tx_bytes),
 * written every second and at exit. It serves tb-goserver's API, so
 * tb-goload drives it unchanged:
 *
 *   GET /light?ce=NAME   the burn loop run LIGHT_ITERS times
 *   GET /medium?ce=NAME  MEDIUM_ITERS times
 *   GET /heavy?ce=NAME   HEAVY_ITERS times
 *
 * (--scale multiplies the three); the answer is --resp bytes of body with a
 * Content-Length, HTTP/1.1 keep-alive. The JDK only, two shapes:
 *
 *   default     com.sun.net.httpserver.HttpServer on a fixed pool of --threads
 *               workers ("tb-worker-N"). Its dispatcher thread ("HTTP-Dispatcher")
 *               only selects: it hands a readable connection to a worker,
 *               which reads and parses the request, runs the handler and
 *               writes the reply, then gives the connection back to the
 *               dispatcher (a queue and a selector wake-up).
 *   --handoff   a java.nio server of its own: one selector thread
 *               ("tb-selector") accepts, reads and parses each request and
 *               hands it to a worker of the pool, which burns and writes the
 *               reply and gives the connection back to the selector.
 *
 * Truth: ThreadMXBean.getCurrentThreadCpuTime() (the thread's CPU clock)
 * around the handler's work - the burn and the reply's write - on the thread
 * that does it; with --handoff also the selector's read and parse of the
 * request. It leaves out what the JVM does for a request outside those spans
 * (the JDK server's reading and parsing, the dispatcher's selecting, the
 * pool's queue) and the runtime's own threads (JIT compilers, GC, VM thread).
 * rx_bytes counts the request line and headers as received; tx_bytes the body.
 */
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

public final class TbJavaServer {
	static final int LIGHT_ITERS = 150000, MEDIUM_ITERS = 600000, HEAVY_ITERS = 1800000;
	static final int MAX_CES = 64, MAX_HEAD = 16384;

	static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
	static final AtomicLong SINK = new AtomicLong();
	static final AtomicLong BAD = new AtomicLong();
	static final byte[] BAD_REPLY = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
			.getBytes(StandardCharsets.US_ASCII);

	/* One CE's truth. */
	static final class Row {
		final AtomicLong requests = new AtomicLong(), cpuNs = new AtomicLong(), rx = new AtomicLong(),
				tx = new AtomicLong();
	}

	static final Map<String, Row> ROWS = new TreeMap<>();

	/* The CE's row (made on first use), or null when MAX_CES are known. */
	static Row row(String ce) {
		synchronized (ROWS) {
			Row r = ROWS.get(ce);
			if (r == null && ROWS.size() < MAX_CES) {
				r = new Row();
				ROWS.put(ce, r);
			}
			return r;
		}
	}

	/* Writes the table to path through path.tmp.PID and rename(2). */
	static void writeTruth(String path) throws IOException {
		StringBuilder b = new StringBuilder("ce,requests,cpu_ns,rx_bytes,tx_bytes\n");
		synchronized (ROWS) {
			for (Map.Entry<String, Row> e : ROWS.entrySet()) {
				Row r = e.getValue();
				b.append(e.getKey()).append(',').append(r.requests.get()).append(',').append(r.cpuNs.get())
						.append(',').append(r.rx.get()).append(',').append(r.tx.get()).append('\n');
			}
		}
		Path tmp = Path.of(path + ".tmp." + ProcessHandle.current().pid());
		try {
			Files.writeString(tmp, b.toString());
			Files.move(tmp, Path.of(path), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
		} catch (IOException e) {
			Files.deleteIfExists(tmp);
			throw new IOException("failed to write '" + path + "': " + e.getMessage(), e);
		}
	}

	/* n rounds of integer arithmetic (xorshift) whose result is kept. */
	static void burn(int n) {
		long x = 88172645463325252L;
		for (int i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >>> 7;
			x ^= x << 17;
		}
		SINK.addAndGet(x);
	}

	/* tb_check_ce: 1..63 of [A-Za-z0-9_.:-], not starting with "__". */
	static boolean validCe(String s) {
		if (s == null || s.isEmpty() || s.length() > 63 || s.startsWith("__"))
			return false;
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			if (!(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
					|| c == ':' || c == '-'))
				return false;
		}
		return true;
	}

	/* The value of ce= in a query string, or null. */
	static String ceOf(String query) {
		if (query == null)
			return null;
		for (String kv : query.split("&"))
			if (kv.startsWith("ce="))
				return kv.substring(3);
		return null;
	}

	/* The path's burn rounds times scale, or -1 for an unknown path. */
	static int iters(String path, int scale) {
		switch (path) {
		case "/light":
			return LIGHT_ITERS * scale;
		case "/medium":
			return MEDIUM_ITERS * scale;
		case "/heavy":
			return HEAVY_ITERS * scale;
		default:
			return -1;
		}
	}

	static ThreadFactory named(String prefix) {
		AtomicInteger n = new AtomicInteger();
		return r -> new Thread(r, prefix + n.getAndIncrement());
	}

	/* The default shape: the JDK's HttpServer, a worker reads, handles and answers. */
	static void serveJdk(InetSocketAddress addr, int threads, int scale, byte[] body) throws IOException {
		HttpServer srv = HttpServer.create(addr, 128);
		srv.setExecutor(Executors.newFixedThreadPool(threads, named("tb-worker-")));
		srv.createContext("/", ex -> {
			try {
				handleJdk(ex, scale, body);
			} finally {
				ex.close();
			}
		});
		srv.start();
	}

	static void handleJdk(HttpExchange ex, int scale, byte[] body) throws IOException {
		int n = iters(ex.getRequestURI().getPath(), scale);
		String ce = ceOf(ex.getRequestURI().getRawQuery());
		Row r = validCe(ce) ? row(ce) : null;

		if (n < 0 || r == null) {
			BAD.incrementAndGet();
			ex.sendResponseHeaders(n < 0 ? 404 : 400, -1);
			return;
		}
		long c0 = MX.getCurrentThreadCpuTime();
		burn(n);
		ex.getResponseHeaders().set("Content-Type", "text/plain");
		ex.sendResponseHeaders(200, body.length);
		try (OutputStream os = ex.getResponseBody()) {
			os.write(body);
		}
		long cpu = MX.getCurrentThreadCpuTime() - c0;
		long rx = ex.getRequestMethod().length() + 1 + ex.getRequestURI().toString().length() + 1
				+ ex.getProtocol().length() + 2 + 2;
		for (Map.Entry<String, List<String>> h : ex.getRequestHeaders().entrySet())
			for (String v : h.getValue())
				rx += h.getKey().length() + 2 + v.length() + 2;
		r.requests.incrementAndGet();
		r.cpuNs.addAndGet(cpu);
		r.rx.addAndGet(rx);
		r.tx.addAndGet(body.length);
	}

	/* One connection of the --handoff shape: owned by the selector, or by one worker while it answers. */
	static final class Conn {
		final SocketChannel ch;
		final ByteBuffer in = ByteBuffer.allocate(MAX_HEAD);
		SelectionKey key;

		Conn(SocketChannel ch) {
			this.ch = ch;
		}
	}

	/* The --handoff shape: the selector reads and parses, a worker burns and answers. */
	static void serveHandoff(InetSocketAddress addr, int threads, int scale, byte[] body) throws IOException {
		Selector sel = Selector.open();
		ServerSocketChannel ls = ServerSocketChannel.open();
		ExecutorService pool = Executors.newFixedThreadPool(threads, named("tb-worker-"));
		ConcurrentLinkedQueue<Conn> back = new ConcurrentLinkedQueue<>();
		byte[] head = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + body.length + "\r\n\r\n")
				.getBytes(StandardCharsets.US_ASCII);
		byte[] reply = new byte[head.length + body.length];

		System.arraycopy(head, 0, reply, 0, head.length);
		System.arraycopy(body, 0, reply, head.length, body.length);
		ls.bind(addr, 128);
		ls.configureBlocking(false);
		ls.register(sel, SelectionKey.OP_ACCEPT);
		Thread t = new Thread(() -> {
			try {
				selectLoop(sel, ls, pool, back, scale, reply, body.length);
			} catch (IOException e) {
				System.err.println("tb-javaserver: selector failed: " + e.getMessage());
				System.exit(1);
			}
		}, "tb-selector");
		t.setDaemon(true);
		t.start();
	}

	static void selectLoop(Selector sel, ServerSocketChannel ls, ExecutorService pool, ConcurrentLinkedQueue<Conn> back,
			int scale, byte[] reply, int bodyLen) throws IOException {
		for (;;) {
			sel.select();
			/* connections the workers gave back: a request already read goes on, else read again */
			for (Conn c; (c = back.poll()) != null;)
				if (headEnd(c.in) < 0 || !readRequests(c, false, pool, back, sel, scale, reply, bodyLen))
					c.key.interestOps(SelectionKey.OP_READ);
			Iterator<SelectionKey> it = sel.selectedKeys().iterator();
			while (it.hasNext()) {
				SelectionKey k = it.next();
				it.remove();
				if (!k.isValid())
					continue;
				if (k.isAcceptable()) {
					SocketChannel ch;
					while ((ch = ls.accept()) != null) {
						ch.configureBlocking(false);
						ch.socket().setTcpNoDelay(true);
						Conn c = new Conn(ch);
						c.key = ch.register(sel, SelectionKey.OP_READ, c);
					}
				} else if (k.isReadable()) {
					readRequests((Conn) k.attachment(), true, pool, back, sel, scale, reply, bodyLen);
				}
			}
		}
	}

	/*
	 * Reads what the connection has (when doRead) and, when a whole request head is in, hands it
	 * to a worker (the connection's key stops reading until the worker gives it
	 * back). Returns whether a request was handed over (or the connection closed).
	 */
	static boolean readRequests(Conn c, boolean doRead, ExecutorService pool, ConcurrentLinkedQueue<Conn> back, Selector sel, int scale,
			byte[] reply, int bodyLen) {
		long c0 = MX.getCurrentThreadCpuTime();
		int n = 0;
		try {
			if (doRead)
				n = c.ch.read(c.in);
		} catch (IOException e) {
			n = -1;
		}
		int end = headEnd(c.in);
		if (n < 0 || (end < 0 && !c.in.hasRemaining())) {
			close(c);
			return true;
		}
		if (end < 0)
			return false;
		String line = new String(c.in.array(), 0, end, StandardCharsets.ISO_8859_1);
		int eol = line.indexOf("\r\n");
		String[] req = (eol < 0 ? line : line.substring(0, eol)).split(" ");
		String target = req.length == 3 ? req[1] : "";
		int q = target.indexOf('?');
		int iters = iters(q < 0 ? target : target.substring(0, q), scale);
		String ce = ceOf(q < 0 ? null : target.substring(q + 1));
		Row r = validCe(ce) ? row(ce) : null;
		/* the head is consumed; a pipelined request after it stays for the next round */
		c.in.flip();
		c.in.position(end + 4);
		c.in.compact();
		if (!req[0].equals("GET") || iters < 0 || r == null) {
			BAD.incrementAndGet();
			writeAll(c.ch, ByteBuffer.wrap(BAD_REPLY));
			close(c);
			return true;
		}
		c.key.interestOps(0);
		long parse = MX.getCurrentThreadCpuTime() - c0;
		long rx = end + 4;
		pool.execute(() -> {
			long w0 = MX.getCurrentThreadCpuTime();
			burn(iters);
			boolean ok = writeAll(c.ch, ByteBuffer.wrap(reply));
			r.requests.incrementAndGet();
			r.cpuNs.addAndGet(parse + MX.getCurrentThreadCpuTime() - w0);
			r.rx.addAndGet(rx);
			r.tx.addAndGet(ok ? bodyLen : 0);
			if (!ok) {
				close(c);
				return;
			}
			back.add(c);
			sel.wakeup();
		});
		return true;
	}

	/* The offset of "\r\n\r\n" in the bytes read so far, or -1. */
	static int headEnd(ByteBuffer b) {
		byte[] a = b.array();
		for (int i = 0; i + 3 < b.position(); i++)
			if (a[i] == '\r' && a[i + 1] == '\n' && a[i + 2] == '\r' && a[i + 3] == '\n')
				return i;
		return -1;
	}

	/* Writes all of b on the non-blocking channel (a small reply: a full socket buffer is waited out). */
	static boolean writeAll(SocketChannel ch, ByteBuffer b) {
		try {
			while (b.hasRemaining())
				if (ch.write(b) == 0)
					Thread.sleep(1);
			return true;
		} catch (IOException | InterruptedException e) {
			return false;
		}
	}

	static void close(Conn c) {
		try {
			if (c.key != null)
				c.key.cancel();
			c.ch.close();
		} catch (IOException e) {
			System.err.println("tb-javaserver: failed to close a connection: " + e.getMessage());
		}
	}

	static void usage() {
		System.err.println("usage: tb-javaserver --listen ADDR:PORT --truth FILE [--threads N] [--scale N] "
				+ "[--resp B] [--handoff]\n  --threads 1..256 workers (4), --scale 1..100, --resp 16..1048576 (256)");
		System.exit(2);
	}

	public static void main(String[] args) throws Exception {
		String listen = "127.0.0.1:7300", truth = null;
		int threads = 4, scale = 1, resp = 256;
		boolean handoff = false;

		try {
			for (int i = 0; i < args.length; i++) {
				switch (args[i]) {
				case "--listen" -> listen = args[++i];
				case "--truth" -> truth = args[++i];
				case "--threads" -> threads = Integer.parseInt(args[++i]);
				case "--scale" -> scale = Integer.parseInt(args[++i]);
				case "--resp" -> resp = Integer.parseInt(args[++i]);
				case "--handoff" -> handoff = true;
				default -> usage();
				}
			}
		} catch (ArrayIndexOutOfBoundsException | NumberFormatException e) {
			usage();
		}
		int colon = listen.lastIndexOf(':');
		if (truth == null || colon < 0 || threads < 1 || threads > 256 || scale < 1 || scale > 100 || resp < 16
				|| resp > 1 << 20)
			usage();
		InetSocketAddress addr = new InetSocketAddress(listen.substring(0, colon),
				Integer.parseInt(listen.substring(colon + 1)));
		byte[] body = (".".repeat(resp - 1) + "\n").getBytes(StandardCharsets.US_ASCII);
		String path = truth;

		if (!MX.isCurrentThreadCpuTimeSupported()) {
			System.err.println("tb-javaserver: this JVM cannot read a thread's CPU time");
			System.exit(1);
		}
		try {
			if (handoff)
				serveHandoff(addr, threads, scale, body);
			else
				serveJdk(addr, threads, scale, body);
		} catch (IOException e) {
			System.err.println("tb-javaserver: failed to listen on '" + listen + "': " + e.getMessage());
			System.exit(1);
		}
		Runtime.getRuntime().addShutdownHook(new Thread(() -> {
			int status = 0;
			try {
				writeTruth(path);
			} catch (IOException e) {
				System.err.println("tb-javaserver: " + e.getMessage());
				status = 1;
			}
			System.out.println("tb-javaserver: stopped, " + BAD.get() + " bad requests");
			System.out.flush();
			Runtime.getRuntime().halt(status);
		}, "tb-exit"));
		System.out.println("tb-javaserver: listening on " + listen + " (" + (handoff ? "handoff" : "jdk") + ", "
				+ threads + " workers, " + Runtime.getRuntime().availableProcessors() + " CPUs)");
		System.out.flush();
		for (;;) {
			Thread.sleep(1000);
			try {
				writeTruth(path);
			} catch (IOException e) {
				System.err.println("tb-javaserver: " + e.getMessage());
			}
		}
	}
}
