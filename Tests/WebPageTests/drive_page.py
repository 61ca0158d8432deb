#!/usr/bin/env python3
"""Drives the zoo's visitor page in a real headless Chromium over the DevTools protocol, as a visitor would:
ticks filters (the seed's "mammals of the seas or fresh waters"), types a search and presses Enter, clicks the first result, clicks the map to set a start,
clicks "Walk to this animal", then moves the start with the keyboard. Prints what the page showed at each
step as one JSON object (WebPageTests checks it) and keeps a screenshot.

Standard library only: the DevTools websocket is spoken by hand (RFC 6455 handshake and frames).

    drive_page.py CHROMIUM PAGE_URL API_URL SCREENSHOT_PATH
"""
import base64, hashlib, json, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time, urllib.error, urllib.parse, urllib.request

TIMEOUT = 60  # seconds for any one step; the machine may be busy building
WINDOW = os.environ.get('DRIVE_PAGE_WINDOW', '1280,900')  # width,height; narrow it to see the phone layout
FULL_PAGE = os.environ.get('DRIVE_PAGE_SHOT', 'full') == 'full'  # or 'window': what a visitor sees at the top


class WebSocket:
    """A client websocket with just what the DevTools protocol needs: text frames, ping, close."""

    def __init__(self, url):
        parsed = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=TIMEOUT)
        self.reader = self.sock.makefile('rb')
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            f"GET {parsed.path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        status = self.reader.readline().decode('latin-1')
        headers = {}
        while True:
            line = self.reader.readline().decode('latin-1').strip()
            if not line:
                break
            name, _, value = line.partition(':')
            headers[name.strip().lower()] = value.strip()
        expected = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
        if ' 101 ' not in status or headers.get('sec-websocket-accept') != expected:
            raise RuntimeError(f'websocket handshake refused: {status.strip()}')

    def send(self, text, opcode=0x1):
        payload = text.encode() if isinstance(text, str) else text
        header = bytes([0x80 | opcode])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack('>H', len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack('>Q', len(payload))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _exactly(self, count):
        data = self.reader.read(count)
        if data is None or len(data) < count:
            raise RuntimeError('the browser closed the DevTools connection')
        return data

    def receive(self):
        message = b''
        while True:
            first, second = self._exactly(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                length = struct.unpack('>H', self._exactly(2))[0]
            elif length == 127:
                length = struct.unpack('>Q', self._exactly(8))[0]
            mask = self._exactly(4) if second & 0x80 else None
            payload = self._exactly(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self.send(payload, opcode=0xA)
                continue
            if opcode == 0x8:
                raise RuntimeError('the browser closed the DevTools connection')
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if first & 0x80:
                    return message.decode()


class Page:
    """One tab, driven by DevTools commands; events are read and dropped."""

    def __init__(self, websocket):
        self.ws = websocket
        self.next_id = 0

    def command(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({'id': self.next_id, 'method': method, 'params': params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get('id') == self.next_id:
                if 'error' in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get('result', {})

    def evaluate(self, expression):
        result = self.command('Runtime.evaluate', expression=expression, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails'].get('exception', {}).get('description', result)}")
        return result['result'].get('value')

    def wait_for(self, expression, what):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        status = self.evaluate("[...document.querySelectorAll('[role=status],[role=alert]')].map(e => e.textContent).join(' | ')")
        raise RuntimeError(f'timed out waiting for {what} (page says: {status})')

    def click(self, selector):
        """A real mouse click at the middle of the element, after scrolling it into view."""
        box = self.evaluate(f"""(() => {{
            const e = document.querySelector({json.dumps(selector)});
            if (!e) return null;
            e.scrollIntoView({{block: 'center'}});
            const r = e.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2}};
        }})()""")
        if box is None:
            raise RuntimeError(f'nothing matches {selector}')
        self.click_at(box['x'], box['y'])

    def click_at(self, x, y):
        for kind in ('mouseMoved', 'mousePressed', 'mouseReleased'):
            self.command('Input.dispatchMouseEvent', type=kind, x=x, y=y, button='left', clickCount=1)

    def press(self, key, code=None, key_code=0, text=None, shift=False):
        params = {'key': key, 'code': code or key, 'windowsVirtualKeyCode': key_code, 'modifiers': 8 if shift else 0}
        if text:
            self.command('Input.dispatchKeyEvent', type='keyDown', text=text, **params)
        else:
            self.command('Input.dispatchKeyEvent', type='rawKeyDown', **params)
        self.command('Input.dispatchKeyEvent', type='keyUp', **params)


def launch(chromium, profile):
    process = subprocess.Popen(
        [chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
         '--no-default-browser-check', '--disable-extensions', '--hide-scrollbars', '--mute-audio',
         f'--user-data-dir={profile}', '--remote-debugging-port=0', f'--window-size={WINDOW}', 'about:blank'],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port_file = os.path.join(profile, 'DevToolsActivePort')
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'chromium exited with {process.returncode}: {process.stderr.read().decode(errors="replace")[-2000:]}')
        try:
            with open(port_file) as file:
                port = int(file.readline())
            break
        except (OSError, ValueError):
            time.sleep(0.1)
    else:
        raise RuntimeError('chromium did not open its DevTools port')
    while time.monotonic() < deadline:
        targets = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=TIMEOUT))
        pages = [t for t in targets if t.get('type') == 'page']
        if pages:
            return process, pages[0]['webSocketDebuggerUrl']
        time.sleep(0.1)
    raise RuntimeError('chromium has no page to drive')


def api_route(api, start, animal_id):
    """The walk the service itself answers for the page's start: what the page must show."""
    request = urllib.request.Request(
        f'{api}/menagerie.zoo.v1.Zoo/Route', method='POST', headers={'Content-Type': 'application/json'},
        data=json.dumps({'from': {'point': start}, 'to': {'animalId': str(animal_id)}}).encode())
    return json.load(urllib.request.urlopen(request, timeout=TIMEOUT))


def fetch_status(url):
    """The status and Content-Type a plain GET of `url` answers (a 404 is an answer, not an error)."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return {'status': response.status, 'type': response.headers.get('Content-Type'), 'bytes': len(response.read())}
    except urllib.error.HTTPError as error:
        return {'status': error.code, 'type': error.headers.get('Content-Type'), 'bytes': 0}


def api_search(api, request):
    """SearchAnimals as the service answers it: the names in order and the total."""
    answer = urllib.request.Request(
        f'{api}/menagerie.zoo.v1.Zoo/SearchAnimals', method='POST', headers={'Content-Type': 'application/json'},
        data=json.dumps(request).encode())
    body = json.load(urllib.request.urlopen(answer, timeout=TIMEOUT))
    return {'names': [a['name'] for a in body.get('animals', [])], 'total': body.get('total', 0)}


# An img element's src, alt and loading, as the page set them (null for no img).
PHOTO = "(img => img && {src: img.getAttribute('src'), alt: img.getAttribute('alt'), loading: img.getAttribute('loading')})"

TICKED = "[...document.querySelectorAll('#filters fieldset.choices input:checked')].map(b => `${b.name}=${b.value}`)"


def tick(page, group, value):
    """Clicks the checkbox `value` of the filter group `group` (ticks or unticks it) and waits for the search."""
    page.evaluate("document.body.dataset.search = 'idle'")
    page.click(f'#{group} input[value={json.dumps(value, ensure_ascii=False)}]')
    page.wait_for("document.body.dataset.search === 'done'", f'the results after clicking {value}')


def shown_results(page):
    return {'status': text(page, '#search-status'),
            'names': page.evaluate("[...document.querySelectorAll('#results .result-name')].map(e => e.textContent)"),
            'ticked': page.evaluate(TICKED)}


def text(page, selector):
    return page.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent.trim() ?? null")


def drive(page, url, api, screenshot):
    report = {}
    page.command('Page.enable')
    page.command('Page.navigate', url=url)
    page.wait_for("document.readyState === 'complete' && document.body?.dataset.map === 'ready'"
                  " && document.body.dataset.search === 'done' && document.querySelectorAll('#filter-class input').length > 0",
                  'the map, the filters and the first results')
    # The icons the page links, and /favicon.ico, which browsers and bookmarking tools ask for unlinked.
    icons = page.evaluate("[...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    report['icons'] = {'linked': {href: fetch_status(href) for href in icons},
                       'favicon.ico': fetch_status(urllib.parse.urljoin(url, '/favicon.ico'))}
    report['initial'] = {
        'status': text(page, '#search-status'),
        'results': page.evaluate("document.querySelectorAll('#results li').length"),
        'footpaths': page.evaluate("document.querySelectorAll('#footpaths path').length"),
        'classes': page.evaluate("[...document.querySelectorAll('#filter-class input')].map(b => b.value)"),
        'photos': page.evaluate(f"[...document.querySelectorAll('#results .result')].map(row => {PHOTO}(row.querySelector('img')))"),
        'names': page.evaluate("[...document.querySelectorAll('#results .result-name')].map(e => e.textContent)"),
        'labels': page.evaluate("[...document.querySelectorAll('#labels text')].map(t => `${t.dataset.kind}:${t.textContent}`)"),
        'labels_overlapping': page.evaluate("""(() => {
            const boxes = [...document.querySelectorAll('#labels text')].map(t => t.getBoundingClientRect());
            return boxes.filter((a, i) => boxes.some((b, j) => j !== i && a.left < b.right && b.left < a.right
                && a.top < b.bottom && b.top < a.bottom)).length;
        })()"""),
    }

    # The filters: open them and tick a class, as a visitor clicks (each tick searches again).
    page.click('#filters-box summary')
    page.wait_for("document.getElementById('filters-box').open", 'the filters opened')
    tick(page, 'filter-class', 'Savci')
    report['filtered'] = {
        'status': text(page, '#search-status'),
        'about': page.evaluate("[...document.querySelectorAll('#results .result-about')].map(e => e.textContent)"),
    }

    # The seed's user test "mammals living in seas or fresh waters": two biotopes ticked, OR within the group and
    # AND with the class; then the same with the animals not kept now. Each against the service's own answer.
    tick(page, 'filter-biotope', 'moře')
    tick(page, 'filter-biotope', 'sladké vody')
    request = {'classes': ['Savci'], 'biotopes': ['moře', 'sladké vody']}
    report['seas'] = shown_results(page) | {'expected': api_search(api, request), 'count': text(page, '#filter-count')}
    page.evaluate("document.body.dataset.search = 'idle'")
    page.click('#include-unavailable')
    page.wait_for("document.body.dataset.search === 'done'", 'the results with the animals not kept now')
    report['seas_all'] = shown_results(page) | {'expected': api_search(api, request | {'includeUnavailable': True})}
    # Back to the mammals alone for what follows.
    page.evaluate("document.body.dataset.search = 'idle'")
    page.click('#include-unavailable')
    page.wait_for("document.body.dataset.search === 'done'", 'the results without the animals not kept now')
    tick(page, 'filter-biotope', 'moře')
    tick(page, 'filter-biotope', 'sladké vody')

    # Type a search and press Enter.
    page.evaluate("document.getElementById('search-text').focus()")
    page.command('Input.insertText', text='lev')
    page.press('Enter', key_code=13, text='\r')
    page.wait_for("document.body.dataset.search === 'done' && document.getElementById('search-text').value === 'lev'"
                  " && !document.getElementById('search-status').textContent.startsWith('Searching')", 'the search results')
    report['search'] = {
        'status': text(page, '#search-status'),
        'names': page.evaluate("[...document.querySelectorAll('#results .result-name')].map(e => e.textContent)"),
    }

    # Open the first result.
    first_id = page.evaluate("document.querySelector('#results .result')?.dataset.id ?? null")
    page.click('#results .result')
    page.wait_for("!document.getElementById('detail').hidden && document.getElementById('detail-name').textContent !== ''", 'the detail')
    report['detail'] = {
        'id': first_id,
        'name': text(page, '#detail-name'),
        'names': text(page, '#detail-names'),
        'place': text(page, '#detail-place'),
        'facts': page.evaluate("[...document.querySelectorAll('#detail-facts dt')].map(e => e.textContent)"),
        'photo': page.evaluate("[...document.querySelectorAll('#detail-links a')].find(a => a.textContent === 'Photo')?.href ?? null"),
        'highlights': page.evaluate("document.querySelectorAll('#highlights circle').length"),
        'focused': page.evaluate("document.activeElement?.id"),
        'figure': page.evaluate(f"{PHOTO}(document.querySelector('#detail-figure img'))"),
        'figure_first': page.evaluate("document.getElementById('detail').firstElementChild.id"),
    }

    # Click the map on a footpath: the first point, along the longest footpaths first, that the map shows (on
    # the real zoo's map some short footpaths are cut off from the rest, and the view clips the streets around).
    point = page.evaluate("""(() => {
        const map = document.getElementById('map');
        map.scrollIntoView({block: 'center'});
        const frame = map.getBoundingClientRect();
        const paths = [...document.querySelectorAll('#footpaths path')].sort((a, b) => b.getTotalLength() - a.getTotalLength());
        for (const path of paths) {
            for (const fraction of [0.1, 0.3, 0.5, 0.7, 0.9]) {
                const at = path.getPointAtLength(path.getTotalLength() * fraction).matrixTransform(path.getScreenCTM());
                if (at.x > frame.left + 5 && at.x < frame.right - 5 && at.y > frame.top + 5 && at.y < frame.bottom - 5) {
                    return {x: at.x, y: at.y};
                }
            }
        }
        return null;
    })()""")
    if point is None:
        raise RuntimeError('no footpath is visible on the map')
    page.click_at(point['x'], point['y'])
    page.wait_for("document.getElementById('start-text').textContent.startsWith('Start')", 'the start marker')
    start = page.evaluate("(() => { const m = document.getElementById('start-marker');"
                          " return {r: Number(m.getAttribute('r')), lat: Number(m.dataset.lat), lon: Number(m.dataset.lon)}; })()")
    report['start'] = {'text': text(page, '#start-text'), 'marker_radius': start['r']}

    # Walk there.
    page.click('#route-animal-button')
    page.wait_for("document.body.dataset.route === 'done'", 'the walk')
    expected = api_route(api, {'lat': start['lat'], 'lon': start['lon']}, first_id)
    report['route'] = {
        'path': page.evaluate("document.getElementById('route-path').getAttribute('d')"),
        'path_length': page.evaluate("document.getElementById('route-path').getTotalLength()"),
        'length': text(page, '#route-length'),
        'time': text(page, '#route-time'),
        'destination': text(page, '#route-destination'),
        'error': text(page, '#map-status'),
        'expected': expected,
    }
    # The whole page, not only the window: the detail and the map with the walk on it.
    page.evaluate("window.scrollTo(0, 0)")
    page.command('Input.dispatchMouseEvent', type='mouseMoved', x=0, y=0)  # no hover highlight in the picture
    if FULL_PAGE:
        size = page.command('Page.getLayoutMetrics')['cssContentSize']
        shot = page.command('Page.captureScreenshot', format='png', captureBeyondViewport=True,
                            clip={'x': 0, 'y': 0, 'width': size['width'], 'height': size['height'], 'scale': 1})
    else:
        shot = page.command('Page.captureScreenshot', format='png')
    with open(screenshot, 'wb') as file:
        file.write(base64.b64decode(shot['data']))
    report['screenshot'] = screenshot

    # Its house instead.
    page.evaluate("document.body.dataset.route = 'idle'")
    page.click('#route-house-button')
    page.wait_for("document.body.dataset.route === 'done'", 'the walk to the house')
    report['house'] = {'destination': text(page, '#route-destination'), 'length': text(page, '#route-length'),
                       'error': text(page, '#map-status')}

    # The keyboard: focus the map, move the cursor and press Enter; the walk follows the new start.
    page.evaluate("document.body.dataset.route = 'idle'; document.getElementById('map').focus()")
    for _ in range(3):
        page.press('ArrowRight', key_code=39)
    page.press('Enter', key_code=13, text='\r')
    page.wait_for("document.getElementById('start-text').textContent.includes('keyboard') && document.body.dataset.route === 'done'",
                  'the walk from the keyboard start')
    report['keyboard'] = {'start': text(page, '#start-text'), 'length': text(page, '#route-length'),
                          'path': page.evaluate("document.getElementById('route-path').getAttribute('d')")}

    # A start far off the map (Shift moves the cursor in long steps): the service's refusal is shown, no walk.
    page.evaluate("document.body.dataset.route = 'idle'")
    for _ in range(40):
        page.press('ArrowUp', key_code=38, shift=True)
    page.press('Enter', key_code=13, text='\r')
    page.wait_for("document.body.dataset.route === 'done'", 'the refused walk')
    report['off_map'] = {'error': text(page, '#map-status'), 'length': text(page, '#route-length'),
                         'path': page.evaluate("document.getElementById('route-path').getAttribute('d')")}
    return report


def main():
    chromium, url, api, screenshot = sys.argv[1:5]
    # Started from a Swift test's worker thread, this process inherits a mask that blocks SIGTERM; so would
    # Chromium, and then terminate() below would not end it.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    profile = tempfile.mkdtemp(prefix='menagerie-chromium-')
    process = None
    try:
        process, websocket_url = launch(chromium, profile)
        page = Page(WebSocket(websocket_url))
        print(json.dumps(drive(page, url, api, screenshot), ensure_ascii=False))
    except Exception as error:  # one readable line for the Swift test, not a traceback in its output
        print(json.dumps({'error': f'{type(error).__name__}: {error}'}))
        sys.exit(1)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == '__main__':
    main()
