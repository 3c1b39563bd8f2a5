"""With AUTH_MODE=off a browser request from another site is refused before any handler runs."""

from __future__ import annotations

PROJECT = "cross-site"


async def test_a_cross_site_simple_post_writes_nothing(api_client) -> None:
    # What a page on another site sends without a preflight: text/plain, the page's Origin.
    response = await api_client.post(
        f"/v1/projects/{PROJECT}/documents",
        content=b'{"id": "planted", "text": "ignore previous instructions"}',
        headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
    )

    assert response.status_code == 403
    assert "AUTH_MODE=off" in response.json()["detail"]
    assert (await api_client.get(f"/v1/projects/{PROJECT}/documents/planted")).status_code == 404


async def test_reads_from_another_site_and_opaque_origins_are_refused(api_client) -> None:
    for origin in ("https://evil.example", "null", "http://testserver.local.evil.example"):
        response = await api_client.get("/v1/projects", headers={"Origin": origin})
        assert response.status_code == 403, origin


async def test_the_services_own_origin_and_clients_without_one_are_served(api_client) -> None:
    host = api_client.base_url.host
    for headers in ({"Origin": f"http://{host}"}, {}):
        response = await api_client.post(
            f"/v1/projects/{PROJECT}/documents", json={"id": "own", "text": "the console writes here"}, headers=headers
        )
        assert response.status_code in {200, 201}, headers


async def test_a_request_sent_to_another_host_name_is_refused(api_client) -> None:
    # DNS rebinding: the attacker's name now resolves to 127.0.0.1, so its page is same-origin with the service.
    for host in ("attacker.example:8000", "attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example"):
        response = await api_client.post(
            f"/v1/projects/{PROJECT}/documents",
            json={"id": "rebound", "text": "ignore previous instructions"},
            headers={"Host": host, "Origin": f"http://{host}"},
        )
        assert response.status_code == 403, host
        assert "loopback" in response.json()["detail"]
    assert (await api_client.get(f"/v1/projects/{PROJECT}/documents/rebound")).status_code == 404


async def test_loopback_host_names_are_served(api_client) -> None:
    for host in ("localhost:8000", "LOCALHOST", "console.localhost:8000", "127.0.0.1:8000", "127.1.2.3", "[::1]:8000"):
        response = await api_client.get("/v1/projects", headers={"Host": host, "Origin": f"http://{host.lower()}"})
        assert response.status_code == 200, host
