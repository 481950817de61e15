"""Resources, resource templates, prompts and completion of the servers behind the gateway, as one
session may see them: listings filtered by its role and group, reads, subscriptions, prompts and
completions routed to the server (or the session's own instance of it) under original names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress

import mcp_types as types

from gateway.auth.visibility import Visibility
from gateway.catalog.merged import Catalog
from gateway.clients.session import SessionContext
from gateway.errors import GatewayError, ProtocolError, clip
from gateway.serving.passthrough import Deliver, PassThrough, Subscription
from gateway.serving.routing import Router
from gateway.skills.host import SKILL_SCHEME, SkillHost

Unfollow = Callable[[], Awaitable[None]]


class Resources:
    """What a session reaches of the servers' resources and prompts, through the gateway."""

    def __init__(
        self, visibility: Visibility, catalog: Catalog, router: Router, skills: SkillHost, passthrough: PassThrough
    ) -> None:
        self._visibility = visibility
        self._catalog = catalog
        self._router = router
        self._skills = skills
        self._passthrough = passthrough

    def listed(self, session: SessionContext) -> list[types.Resource]:
        """Resources this session may see: its skills' files, then the servers' resources."""
        sources = self._visibility.sources(session)
        return self._skills.resources(session) + [
            resource for resource in self._catalog.resources if self._catalog.source_of(resource.uri) in sources
        ]

    def templates(self, session: SessionContext) -> list[types.ResourceTemplate]:
        """Resource templates of the sources this session may see."""
        sources = self._visibility.sources(session)
        return [item for item in self._catalog.templates if self._catalog.source_of(item.uri_template) in sources]

    def prompts(self, session: SessionContext) -> list[types.Prompt]:
        """Prompts of the sources this session may see."""
        sources = self._visibility.sources(session)
        return [prompt for prompt in self._catalog.prompts if self._catalog.prompt_route(prompt.name).source in sources]

    async def read(self, session: SessionContext, uri: str) -> types.ReadResourceResult:
        """Read an exposed resource: a skill file, or a resource of the server behind it."""
        if uri.startswith(SKILL_SCHEME):
            return self._skills.read_resource(session, uri)
        route = self._visibility.route(session, self._catalog.resource_route(uri), f"resource: {clip(uri)}")
        result = await (await self._router.upstream(session, route)).read_resource(route.original)
        contents = [content.model_copy(update={"uri": uri}) for content in result.contents]
        return result.model_copy(update={"contents": contents})

    async def subscribe(self, session: SessionContext, uri: str, subscribed: bool) -> None:
        """Subscribe the session to updates of an exposed resource (or end that), telling the server
        behind it on the first subscription and the last unsubscription."""
        route = self._visibility.route(session, self._catalog.resource_route(uri), f"resource: {clip(uri)}")
        upstream = await self._router.upstream(session, route)
        if not subscribed:
            if self._passthrough.unsubscribe(session, route.source, route.original):
                await upstream.subscribe(route.original, False)
            return
        if not upstream.supports_subscriptions():
            raise ProtocolError(f"Server '{route.source}' does not offer subscriptions to resource: {clip(uri)}")
        if self._passthrough.subscribe(Subscription(session, uri, route.source, route.original)):
            await upstream.subscribe(route.original, True)

    async def follow(self, session: SessionContext, uri: str, send: Deliver) -> Unfollow | None:
        """Have `send` told of the updates of an exposed resource, subscribing on its server if no
        one else is; how to stop, or None when the session may not see the resource or its server
        offers no subscriptions (what a 2026-era `subscriptions/listen` stream does not get)."""
        try:
            route = self._visibility.route(session, self._catalog.resource_route(uri), f"resource: {clip(uri)}")
            upstream = await self._router.upstream(session, route)
        except GatewayError:
            return None
        if not upstream.supports_subscriptions():
            return None
        subscription = Subscription(session, uri, route.source, route.original, send)
        if self._passthrough.subscribe(subscription):
            try:
                await upstream.subscribe(route.original, True)
            except GatewayError:
                self._passthrough.drop(subscription)
                return None

        async def unfollow() -> None:
            if self._passthrough.drop(subscription):
                with suppress(GatewayError):  # a server gone or restarted holds no subscription anyway
                    await upstream.subscribe(route.original, False)

        return unfollow

    async def get_prompt(
        self, session: SessionContext, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        """Get an exposed prompt from the server behind it, its resources under the URIs a client reads them by."""
        route = self._visibility.route(session, self._catalog.prompt_route(name), f"prompt: {clip(name)}")
        result = await (await self._router.upstream(session, route)).get_prompt(route.original, arguments)
        return self._catalog.exposed_prompt(route.source, result)

    async def complete(self, session: SessionContext, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Forward argument completion for an exposed prompt or resource template."""
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            route = self._visibility.route(session, self._catalog.prompt_route(ref.name), f"prompt: {clip(ref.name)}")
            ref = ref.model_copy(update={"name": route.original})
        else:
            route = self._visibility.route(session, self._catalog.resource_route(ref.uri), f"resource: {clip(ref.uri)}")
            ref = ref.model_copy(update={"uri": route.original})
        return await (await self._router.upstream(session, route)).complete(params.model_copy(update={"ref": ref}))
