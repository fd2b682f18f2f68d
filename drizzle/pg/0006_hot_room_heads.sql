DROP INDEX "rooms_public_activity";--> statement-breakpoint
DROP INDEX "rooms_public_messages";--> statement-breakpoint
DROP INDEX "rooms_public_agents";--> statement-breakpoint
DROP INDEX "rooms_expires";--> statement-breakpoint
ALTER TABLE "rooms" ADD COLUMN "public_activity" text GENERATED ALWAYS AS (CASE WHEN is_public THEN last_activity_at END) STORED;--> statement-breakpoint
ALTER TABLE "rooms" ADD COLUMN "public_messages" integer GENERATED ALWAYS AS (CASE WHEN is_public THEN message_count END) STORED;--> statement-breakpoint
ALTER TABLE "rooms" ADD COLUMN "public_agents" integer GENERATED ALWAYS AS (CASE WHEN is_public THEN agent_count END) STORED;--> statement-breakpoint
ALTER TABLE "rooms" ADD COLUMN "expires_hour" text GENERATED ALWAYS AS (left(expires_at, 13)) STORED NOT NULL;--> statement-breakpoint
CREATE INDEX "rooms_public_activity" ON "rooms" USING btree ("public_activity") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_public_messages" ON "rooms" USING btree ("public_messages") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_public_agents" ON "rooms" USING btree ("public_agents") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_expires" ON "rooms" USING btree ("expires_hour");