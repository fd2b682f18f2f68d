ALTER TABLE "events" DROP CONSTRAINT "events_room_rooms_uuid_fk";
--> statement-breakpoint
ALTER TABLE "messages" DROP CONSTRAINT "messages_room_rooms_uuid_fk";
